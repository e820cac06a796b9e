"""The Copilot adapter against a CLI that misbehaves (tests/adapters/fake_copilot.py).

The real CLI is what the adapter is tested against (test_copilot.py); this stand-in is
for what the real one would not do on demand: exit at start, print no framing, never
answer, speak another protocol version, send a 9 MiB event or a request of its own,
accept an abort and never go idle, refuse an abort, take a prompt and never answer it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from band_trio import AdapterError, Policy, StopOutcome, Turn
from band_trio.adapters import CopilotAdapter, CopilotCli, CopilotConfig, CopilotError
from band_trio.adapters._copilot_cli import Connection
from band_trio.platform import Platform
from band_trio.policy import UpstreamPolicy
from support import agent_for, background_agent, replies, running_agent, seeded, status

FAKE = Path(__file__).with_name("fake_copilot.py")
DEADLINE = 10


class Watched(CopilotAdapter):
    """The adapter, with a way to wait until its turn's session has the prompt."""

    def __init__(self, config: CopilotConfig) -> None:
        super().__init__(config)
        self.turns: list[Turn] = []
        self._entered = trio.Event()

    async def on_turn(self, turn: Turn) -> None:
        self.turns.append(turn)
        self._entered.set()
        await super().on_turn(turn)

    async def at_work(self) -> None:
        await self._entered.wait()
        turn = self.turns[-1]
        while not any(work.is_started for work in turn.remote_works):
            await turn.wait_remote_change()


def fake(tmp_path: Path, mode: str, **overrides: Any) -> CopilotConfig:
    """Settings whose CLI is the fake in `mode`, working in a folder under `tmp_path`."""
    script = tmp_path / f"copilot-{mode}"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" {mode}\n')
    script.chmod(0o755)
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    settings: dict[str, Any] = {
        "cli": str(script),
        "model": "m",
        "base_url": "http://127.0.0.1:9/v1",
        "working_directory": str(work),
        "start_deadline": 5.0,
        "kill_grace": 0.5,
    }
    return CopilotConfig(**{**settings, **overrides})


def received(config: CopilotConfig) -> list[dict[str, Any]]:
    assert config.working_directory is not None
    path = Path(config.working_directory) / "received.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize(
    ("mode", "overrides", "says"),
    [
        ("exit", {}, "exited with status 3: boom: no licence for this machine"),
        ("garbage", {}, "not JSON-RPC as framed: not a header line"),
        ("silent", {"start_deadline": 0.3}, "did not answer within 0.3s"),
        ("old", {}, "speaks SDK protocol 2; band-trio speaks 3"),
    ],
)
async def test_a_cli_that_cannot_be_used_is_a_clear_error_for_the_turn(
    tmp_path: Path, mode: str, overrides: dict[str, Any], says: str
) -> None:
    cli = CopilotCli(fake(tmp_path, mode, **overrides))
    with trio.fail_after(DEADLINE):
        async with cli.running():
            with pytest.raises(CopilotError) as raised:
                await cli.connection()
            with pytest.raises(CopilotError):  # asked again: tried again, same answer
                await cli.connection()
    assert says in str(raised.value)
    assert cli.starts == 2 and cli.pid is None


async def test_outside_a_run_the_cli_is_not_started_and_says_why(tmp_path: Path) -> None:
    cli = CopilotCli(fake(tmp_path, "normal"))
    with pytest.raises(CopilotError, match=r"enter `adapter.lifespan\(\)`"):
        await cli.connection()
    assert cli.starts == 0


async def test_an_oversized_event_is_skipped_and_a_request_of_the_cli_refused(
    platform: Platform, tmp_path: Path
) -> None:
    _, room, user = seeded(platform)
    config = fake(tmp_path, "flood", max_frame_bytes=1024 * 1024)
    adapter = CopilotAdapter(config)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter):
            message = platform.post_message(room, user, "hello")
            await platform.wait_until(lambda: status(platform, message) == "processed")
            connection = await adapter.cli.connection()
            assert connection.rpc.oversized == 1 and connection.rpc.malformed == 0
    assert replies(platform, room) == ["fake answer 1"]
    [refusal] = [m for m in received(config) if m.get("id") == "cli-1"]
    assert refusal["error"]["code"] == -32601


@pytest.mark.parametrize(
    ("mode", "outcome", "detail"),
    [
        ("stubborn", StopOutcome.REQUESTED, "the session did not go idle in time"),
        ("refuse", StopOutcome.UNCONFIRMED, "session.abort answered {'success': False}"),
    ],
)
async def test_a_stop_the_cli_does_not_carry_out_is_reported_and_the_room_goes_on(
    platform: Platform, tmp_path: Path, mode: str, outcome: StopOutcome, detail: str
) -> None:
    agent_id, room, user = seeded(platform)
    config = fake(tmp_path, mode, request_deadline=0.3)
    adapter = Watched(config)
    policy = Policy(backend_stop_grace=0.5, upstream=UpstreamPolicy(resettle_grace=0.3))
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, policy=policy) as running:
            stuck = platform.post_message(room, user, "wait for ever")
            await adapter.at_work()
            platform.send_control(agent_id, "interrupt", room_id=room)
            await platform.wait_until(lambda: status(platform, stuck) == "processed")
            after = platform.post_message(room, user, "and now?")
            await platform.wait_until(lambda: status(platform, after) == "processed")
            [stop] = running.agent.remote_stops.recent
    assert (stop.outcome, detail in stop.detail) == (outcome, True)
    assert stop.took < 0.5 + 0.2  # within the stop's grace
    aborts = [m for m in received(config) if m.get("method") == "session.abort"]
    # the session was left busy: it is aborted again before the next prompt
    assert len(aborts) == 2
    assert replies(platform, room) == ["fake answer 2"]


async def test_an_agent_whose_cli_cannot_start_fails_to_start_with_the_reason(
    platform: Platform, tmp_path: Path
) -> None:
    adapter = CopilotAdapter(fake(tmp_path, "exit"))
    with trio.fail_after(DEADLINE):
        async with background_agent(platform, adapter) as run:
            await run.finished.wait()
    assert isinstance(run.error, AdapterError)
    assert "exited with status 3: boom: no licence for this machine" in str(run.error)
    assert not run.started.is_set()  # no room was served


class Muted(Watched):
    """The adapter, with a way to wait until its turn has sent the prompt."""

    def __init__(self, config: CopilotConfig) -> None:
        super().__init__(config)
        self.sending = trio.Event()

    async def _call(self, connection: Connection, method: str, params: dict[str, Any]) -> Any:
        if method == "session.send":
            self.sending.set()
        return await super()._call(connection, method, params)


MUTED = {
    "interrupt": Policy(backend_stop_grace=0.5),
    "a caller's deadline": Policy(backend_stop_grace=0.5),
    "hard stop": Policy(backend_stop_grace=30.0, shutdown_grace=30.0, hard_stop_grace=0.1),
}
"""The start's bound after an abort (0.5 s), far below the CLI call's own (60 s here): a
canceller that does not record the abort leaves the start to the latter. For the hard
stop, every other grace is long: only its own cut ends the start in time."""


@pytest.mark.parametrize("how", ["interrupt", "a caller's deadline", "hard stop"])
async def test_a_prompt_the_cli_never_answers_is_cut_by_whoever_cancels_the_turn(
    platform: Platform, tmp_path: Path, how: str
) -> None:
    """`session.send` runs shielded (the start); a silent CLI holds it until the turn's
    abort plus the stop grace, or the hard stop's grace: never the 30 s of the call's
    own deadline, 60 s here (issue 21, items 1 and 2). A cut start is a `StartCutError`, the
    turn's abort, never a failed message; the room's next message is answered."""
    agent_id, room, user = seeded(platform)
    config = fake(tmp_path, "mute", request_deadline=60.0)
    adapter = Muted(config)
    agent = agent_for(platform, adapter, policy=MUTED[how])
    with trio.fail_after(DEADLINE):  # a canceller that forgot the abort: the 60 s
        async with background_agent(platform, agent=agent) as bg:
            await bg.started.wait()
            held = platform.post_message(room, user, "hello")
            await adapter.sending.wait()
            if how == "interrupt":
                platform.send_control(agent_id, "interrupt", room_id=room)
                await platform.wait_until(lambda: status(platform, held) == "processed")
                after = platform.post_message(room, user, "and now?")
                await platform.wait_until(lambda: status(platform, after) == "processed")
                assert replies(platform, room) == ["fake answer 1"]
            elif how == "hard stop":
                agent.hard_stop("test")
                await bg.finished.wait()
            else:
                bg.cancel()  # not the agent's own stop: its caller gave up on it
                await bg.finished.wait()
    assert bg.error is None
    cut = [(s.outcome, s.detail) for s in agent.remote_stops.recent]
    if how == "a caller's deadline":  # the CLI runs inside the run: it ended with it,
        assert cut == []  # and so did the call waiting on it (CopilotGone), unstopped
    else:
        assert cut == [(StopOutcome.UNCONFIRMED, "the start call revealed no handle in time")]
    assert status(platform, held) == ("processed" if how == "interrupt" else "processing")
