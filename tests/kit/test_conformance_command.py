"""`band-trio conformance MODULE:FACTORY` as a real process: table, JSON, exit status."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from peers import shared_a2a_peer, shared_stubllm_peer
from peers.acp_agents import opencode_acp_config
from peers.opencode import opencode_peer

BAND_TRIO = [str(Path(sys.executable).with_name("band-trio"))]  # the console script

SWALLOWER = """
import pytest
import trio
from band_trio import Adapter, Turn

class Swallower(Adapter):
    async def on_turn(self, turn: Turn) -> None:
        if turn.message.content == "sleep=30":  # the kit's long prompt
            try:
                await trio.sleep(30)
            except trio.Cancelled:
                return  # the bug the kit is for
        await turn.reply("done")
"""


async def conformance(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    inherited = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # MODULE: the cwd
    env = {**inherited, **(env or {})}
    with trio.fail_after(120):
        return await trio.run_process(
            [*BAND_TRIO, "conformance", *args],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            cwd=cwd,
            env=env,
        )


async def test_a_conforming_adapter_exits_0_with_the_table_and_the_json(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    done = await conformance("band_trio.adapters:demo", "--json", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    text = done.stdout.decode()
    assert "| interrupt mid-work | passed |" in text
    assert "| remote stop sent once per abort | not applicable |" in text
    assert re.search(r"^\d+ probes: \d+ passed, [1-9]\d* do not apply, 0 failed$", text, re.M)
    results = json.loads(out.read_text())
    assert {r["outcome"] for r in results} == {"passed", "not applicable"}
    assert all(set(r) == {"probe", "outcome", "passed", "latency_s", "observed"} for r in results)


async def test_a_swallowing_adapter_exits_1_naming_the_probe(tmp_path: Path) -> None:
    (tmp_path / "mine.py").write_text(SWALLOWER)
    done = await conformance("mine:Swallower", cwd=tmp_path)
    assert done.returncode == 1
    text = done.stdout.decode()
    assert "| a swallowed cancellation is reported | failed |" in text
    assert "swallowed the cancellation" in text
    assert re.search(r"^\d+ probes: \d+ passed, \d+ do not apply, [1-9]\d* failed$", text, re.M)
    assert b"Traceback" not in done.stderr


async def test_a_factory_that_cannot_be_built_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = await conformance("no_such_module:x", cwd=tmp_path)
    assert done.returncode == 2
    lines = [line for line in done.stderr.decode().splitlines() if line.strip()]
    assert len(lines) == 1 and "cannot load adapter" in lines[0]
    done = await conformance("band_trio.adapters", cwd=tmp_path)  # no colon, no FACTORY
    assert done.returncode == 2
    (line,) = [line for line in done.stderr.decode().splitlines() if line.strip()]
    assert line.startswith("band-trio: the adapter must be MODULE:FACTORY, got ")
    assert "--adapter" not in line and "band_trio.adapters:NAME" in line


def test_the_summary_counts_each_outcome_apart() -> None:
    from band_trio.cli._conformance import summary
    from band_trio.testing import ProbeResult

    results = [ProbeResult(f"p{i}", "not applicable", "") for i in range(3)]
    results += [ProbeResult(f"f{i}", "failed", "") for i in range(8)]
    assert summary(results) == "11 probes: 0 passed, 3 do not apply, 8 failed"
    one = summary([ProbeResult("p", "passed", "")])
    assert one == "1 probe: 1 passed, 0 do not apply, 0 failed"


COMMAND_SCRIPT = 'read line; case "$line" in long*) sleep 30 & wait;; esac; echo "said: $line"'


@pytest.mark.timeout(240)  # past the test's own deadline: the peers are stopped first
@pytest.mark.long(19)
async def test_the_opencode_adapter_passes_the_command_against_opencode(tmp_path: Path) -> None:
    """The kit's only run against OpenCode, so every run has it (the others below are
    held in process too: tests/kit/test_reference_adapters_conform.py)."""
    await passes_the_command(tmp_path, "opencode")


# One case a run, rotated daily (every case with --all-seeds): each adapter passes the
# kit in process every run; here the command's path, as for OpenCode above.
@pytest.mark.timeout(240)
@pytest.mark.rotated
@pytest.mark.parametrize("name", ["openai_chat", "anthropic", "a2a", "command", "acp"])
async def test_every_reference_adapter_passes_the_command_against_its_real_peer(
    tmp_path: Path, name: str
) -> None:
    await passes_the_command(tmp_path, name)


async def passes_the_command(tmp_path: Path, name: str) -> None:
    """`band-trio conformance band_trio.adapters:NAME`, configured from the environment
    as a user would, against each adapter's real peer: exit 0, nothing failed. No bound
    on how long a run takes (speed is the benchmarks'); the whole test has a deadline,
    under which its peers' processes are stopped. One test an adapter, each with only
    its own peers: pytest-xdist runs them side by side (one test of the four in a row
    was the suite's longest after the bench)."""
    with trio.fail_after(200):
        async with _peers_of(name) as (env, long, quick):
            out = tmp_path / f"{name}.json"
            settle = ("--settle", "5") if name in ("opencode", "acp") else ()
            done = await conformance(
                f"band_trio.adapters:{name}",
                *("--long", long, "--quick", quick, "--json", str(out), *settle),
                cwd=tmp_path,
                env=env,
            )
    text = done.stdout.decode()
    assert done.returncode == 0, f"{name}:\n{text}\n{done.stderr.decode()}"
    outcomes = {r["probe"]: r["outcome"] for r in json.loads(out.read_text())}
    assert "failed" not in outcomes.values(), (name, outcomes)
    if name != "openai_chat":  # no tool prompt given here: that probe is n/a
        assert outcomes["remote stop sent once per abort"] == "passed", (name, text)


@contextlib.asynccontextmanager
async def _peers_of(name: str) -> AsyncIterator[tuple[dict[str, str], str, str]]:
    """The real peer(s) adapter `name` talks to, running; its environment and prompts."""
    if name == "command":
        yield {"BAND_COMMAND": f"sh -c '{COMMAND_SCRIPT}'"}, "long", "quick"
    elif name == "a2a":
        async with shared_a2a_peer() as a2a:
            yield {"BAND_A2A_URL": a2a.url}, "mode=normal chunks=400 delay=0.05", "mode=quick"
    elif name == "openai_chat":
        async with shared_stubllm_peer(chunk_delay_ms=50) as llm:
            yield {"BAND_OPENAI_BASE_URL": llm.base_url}, "[slow] go on", "[quick] hi"
    elif name == "acp":  # `opencode acp`, named as a user would: BAND_ACP_COMMAND
        async with shared_stubllm_peer(chunk_delay_ms=50) as llm:
            with opencode_acp_config(llm) as config:
                env = {
                    "BAND_ACP_COMMAND": shlex.join(config.command),
                    "BAND_ACP_CWD": config.working_directory,
                }
                yield env, "[slow] go on", "[quick] hi"
    elif name == "anthropic":
        async with shared_stubllm_peer(chunk_delay_ms=50) as llm:
            env = {"BAND_ANTHROPIC_BASE_URL": llm.url, "BAND_ANTHROPIC_API_KEY": "sk-test"}
            yield env, "[slow] go on", "[quick] hi"
    else:  # its prompt may take over the kit's 0.3 s to start under load: --settle
        async with shared_stubllm_peer(chunk_delay_ms=50) as llm, opencode_peer(llm.base_url) as oc:
            env = {"BAND_OPENCODE_URL": oc.url, "BAND_OPENCODE_MODEL": "stub/gpt-4o"}
            yield env, "[slow] go on", "[quick] hi"


BROKEN = """
import sys
sys.path.insert(0, {kit!r})
from broken import (DanglingToolCall, LeavesChild, PostsAfterCancel, Remote, RemoteLeftOpen,
                    ShortRemoteBlock, SwallowsCancel, SwallowsLeave, UnshieldedStart,
                    transcript_of)

def posts_after_cancel(): return PostsAfterCancel()
def short_remote_block(): return ShortRemoteBlock(Remote())
def unshielded_start(): return UnshieldedStart(Remote(start_takes=0.05))
def remote_left_open(): return RemoteLeftOpen(Remote())
def swallows_leave(): return SwallowsLeave()
def swallows_cancel(): return SwallowsCancel()
def leaves_child(): return LeavesChild()
def dangling_tool_call(): return DanglingToolCall()
"""


# One case a run, rotated daily (every case with --all-seeds): each of these adapters
# fails its probe in process every run (tests/kit/test_probes_catch_broken_adapters.py);
# here the command's path, a process each, about 6 s of CPU a case.
@pytest.mark.rotated
@pytest.mark.parametrize(
    ("factory", "probe"),
    [
        ("posts_after_cancel", "interrupt mid-work"),
        ("short_remote_block", "remote stop sent once per abort"),
        ("unshielded_start", "stop before the remote handle exists"),
        ("remote_left_open", "a stop after the remote work finished sends nothing"),
        ("swallows_leave", "leaving the room waits for the stop"),
        ("swallows_cancel", "a swallowed cancellation is reported"),
        ("leaves_child", "nothing left after the agent stops"),
        ("dangling_tool_call", "history valid after an abort mid tool-calls"),
    ],
)
async def test_the_command_fails_each_broken_adapter_naming_its_probe(
    tmp_path: Path, factory: str, probe: str
) -> None:
    (tmp_path / "mine.py").write_text(BROKEN.format(kit=str(Path(__file__).parent)))
    tools = ["--tool", "use the tool sleep=30", "--transcript", "mine:transcript_of"]
    done = await conformance(f"mine:{factory}", *(tools if "tool" in factory else ()), cwd=tmp_path)
    text = done.stdout.decode()
    for pid in re.findall(r"child process left running: pid (\d+)", text):
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGKILL)  # what the broken adapter left: ours to stop
    assert done.returncode == 1, text
    assert f"| {probe} | failed |" in text, text
    assert b"Traceback" not in done.stderr
