"""The long-running commands collect garbage rarely, and skip the final collection.

Only the commands do it (`band-trio agent`, `bridge`, `platform`): the figures that
made it worth it are the benchmark's (docs/benchmarks.md, "One bridge, many
identities"); here, that the settings are applied, and only by the commands."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from band_trio import Agent, Policy
from band_trio.adapters import DemoAdapter
from band_trio.bridge import Bridge, BridgeConfig, BridgePolicy
from band_trio.cli import EXIT_CRASH, main
from band_trio.cli._collector import collect_rarely, freeze_for_exit
from band_trio.policy import PlatformPolicy
from support import bridge_config_out_of_reach


@pytest.fixture
def collector() -> Iterator[None]:
    """The test process's collector as it was, whatever the test did to it."""
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def test_collect_rarely_freezes_what_is_alive_and_raises_the_first_threshold(
    collector: None,
) -> None:
    gc.unfreeze()
    middle, old = gc.get_threshold()[1:]
    collect_rarely(12_345)
    assert gc.get_threshold() == (12_345, middle, old)
    assert gc.get_freeze_count() > 0
    frozen = gc.get_freeze_count()
    freeze_for_exit()
    assert gc.get_freeze_count() >= frozen


def test_the_bridge_command_applies_the_policys_threshold(
    collector: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = bridge_config_out_of_reach(
        tmp_path / "bridge.json", policy={"collector_threshold": 4321}
    )
    gc.unfreeze()
    assert main(["bridge", "--config", str(path)]) == EXIT_CRASH
    assert gc.get_threshold()[0] == 4321
    assert gc.get_freeze_count() > 0
    capsys.readouterr()


def test_a_bridge_run_as_a_library_leaves_the_collector_alone(collector: None) -> None:
    before = gc.get_threshold()
    Bridge(BridgeConfig(()), bridge_policy=BridgePolicy(collector_threshold=99))
    assert gc.get_threshold() == before


@pytest.mark.parametrize("value", [0, -1, 2**31])
def test_the_thresholds_are_checked(value: int) -> None:
    """Below 1, or past what `gc.set_threshold` takes (a C int: it would raise
    `OverflowError` in the command, a traceback)."""
    with pytest.raises(ValueError, match="collector_threshold"):
        BridgePolicy(collector_threshold=value)
    with pytest.raises(ValueError, match="collector_threshold"):
        PlatformPolicy(collector_threshold=value)
    with pytest.raises(ValueError, match="collector_threshold"):
        Policy(collector_threshold=value)


def test_the_platform_command_applies_its_policys_threshold(
    collector: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`band-trio platform` tunes the collector before it serves (the serving itself
    is replaced: it runs until a signal)."""
    from band_trio.cli import _platform

    served: list[object] = []

    async def serve(*args: object) -> None:
        served.append(args)

    monkeypatch.setattr(_platform, "_serve", serve)
    gc.unfreeze()
    assert main(["platform", "--port", "0"]) == 0
    assert len(served) == 1
    assert gc.get_threshold()[0] == PlatformPolicy().collector_threshold
    assert gc.get_freeze_count() > 0


def test_the_agent_command_applies_its_policys_threshold(
    collector: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`band-trio agent` tunes the collector once its adapter is loaded, before it
    serves (the serving itself is replaced: it runs until a signal). At a thousand
    busy rooms the default threshold ran ~80 collections (~50-140 ms) in the wave of
    one agent-wide interrupt, and ~130-240 ms of collections in a busy SIGTERM → exit
    (docs/benchmarks.md, the scale rows)."""
    from band_trio.cli import _agent

    served: list[object] = []

    async def serve(agent: object) -> None:
        served.append(agent)

    monkeypatch.setattr(_agent, "serve_until_signalled", serve)
    gc.unfreeze()
    argv = ["agent", "--agent-id", "a", "--api-key", "k", "--rest-url", "http://127.0.0.1:9"]
    assert main([*argv, "--ws-url", "ws://127.0.0.1:9/socket"]) == 0
    assert len(served) == 1
    assert gc.get_threshold()[0] == Policy().collector_threshold
    assert gc.get_freeze_count() > 0


def test_an_agent_run_as_a_library_leaves_the_collector_alone(collector: None) -> None:
    before = gc.get_threshold()
    Agent(DemoAdapter(), agent_id="a", api_key="k", rest_url="http://x", ws_url="ws://x",
          policy=Policy(collector_threshold=99))  # fmt: skip
    assert gc.get_threshold() == before
