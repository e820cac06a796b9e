"""`band-trio bench`'s Copilot row, in pieces: when it runs, and the band-trio subject's side
of a trial against the real CLI (the quick bench as a whole is test_bench_smoke.py's, which
leaves the row out: the CLI's start would make that long test longer still).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from band_trio.bench._peer import copilot_cli, peer_missing
from band_trio.bench._protocol import COPILOT
from band_trio.bench._subject import Identity, environment
from band_trio.bench._trio_subject import BenchAdapter, live_tasks
from band_trio.platform import Platform
from peers import shared_stubllm_peer
from peers.copilot import copilot_binary
from support import running_agent, seeded, status


def test_the_row_runs_only_where_the_cli_is_and_only_for_band_trio(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("BAND_COPILOT_CLI", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert copilot_cli() is None
    assert "needs the GitHub Copilot CLI" in (peer_missing("copilot") or "")
    monkeypatch.setenv("BAND_COPILOT_CLI", str(copilot_binary()))
    assert peer_missing("copilot") is None
    for runtime, passed in (("band-trio", True), ("band-sdk", False)):
        identity = Identity(runtime, "agent", "key", ("room",))  # type: ignore[arg-type]
        env = environment(identity, "http://127.0.0.1:9", "ws://127.0.0.1:9/socket")
        assert ("BAND_COPILOT_CLI" in env) is passed


async def test_the_subject_stops_the_clis_model_call_and_counts_its_tasks_apart(
    platform: Platform, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent_id, room, user = seeded(platform)
    monkeypatch.setenv("BAND_COPILOT_CLI", str(copilot_binary()))
    with trio.fail_after(40):
        async with shared_stubllm_peer(chunk_delay_ms=20) as llm:
            adapter = BenchAdapter()
            async with running_agent(platform, adapter):
                before = live_tasks()
                assert adapter._copilot is not None and adapter._copilot.starts == 0  # lazily
                message = platform.post_message(room, user, f"{COPILOT} {llm.base_url} [slow] go")
                await llm.wait_for(lambda e: e["count"] >= 3, timeout=30, event="chunk")
                platform.send_control(agent_id, "interrupt", room_id=room)
                cancelled = await llm.wait_for(event="stream_cancelled", timeout=30)
                await platform.wait_until(lambda: status(platform, message) == "processed")
                # the CLI's tasks are the subject's for the run, not a leak of the trial
                assert live_tasks() - adapter._copilot.tasks <= before
                pid = adapter._copilot.pid
    assert cancelled["count"] < 80 and pid is not None
    assert _gone(pid)  # the subject's run ended, and with it the CLI (reaped)


def _gone(pid: int) -> bool:
    return not Path(f"/proc/{pid}").exists()
