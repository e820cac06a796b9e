"""`band-trio bench`'s ACP row, in pieces: when it runs, and the band-trio subject's side of a
trial against `opencode acp` (the quick bench as a whole is test_bench_smoke.py's, which
leaves the row out: OpenCode's start would make that long test longer still).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from band_trio.bench._peer import opencode_bin, peer_missing
from band_trio.bench._protocol import ACP
from band_trio.bench._subject import Identity, environment
from band_trio.bench._trio_subject import BenchAdapter, live_tasks
from band_trio.platform import Platform
from peers import shared_stubllm_peer
from peers.opencode import opencode_binary
from support import running_agent, seeded, status


def test_the_row_runs_only_where_opencode_is_and_only_for_band_trio(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("BAND_OPENCODE_BIN", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert opencode_bin() is None
    assert "needs OpenCode (an ACP agent)" in (peer_missing("acp") or "")
    monkeypatch.setenv("BAND_OPENCODE_BIN", str(opencode_binary()))
    assert peer_missing("acp") is None
    for runtime, passed in (("band-trio", True), ("band-sdk", False)):
        identity = Identity(runtime, "agent", "key", ("room",))  # type: ignore[arg-type]
        env = environment(identity, "http://127.0.0.1:9", "ws://127.0.0.1:9/socket")
        assert ("BAND_OPENCODE_BIN" in env) is passed


@pytest.mark.long(6)
async def test_the_subject_stops_opencodes_model_call_and_counts_its_tasks_apart(
    platform: Platform, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent_id, room, user = seeded(platform)
    monkeypatch.setenv("BAND_OPENCODE_BIN", str(opencode_binary()))
    with trio.fail_after(50):
        # 50 ms a chunk: 4 s for the interrupt to reach OpenCode under a loaded machine's
        # scheduling (at 20 ms the answer could end before it, and nothing be cancelled)
        async with shared_stubllm_peer(chunk_delay_ms=50) as llm:
            adapter = BenchAdapter()
            async with running_agent(platform, adapter):
                before = live_tasks()
                assert adapter._opencode is not None and adapter._opencode.starts == 0  # lazily
                message = platform.post_message(room, user, f"{ACP} {llm.base_url} [slow] go")
                # the prompt's model call (OpenCode also asks the model for a new
                # session's title, with the same message, and no tools: not stopped)
                started = await llm.wait_for(
                    lambda e: isinstance(e["body"], dict) and bool(e["body"].get("tools")),
                    timeout=40,
                    event="request",
                )
                await llm.wait_for(
                    lambda e: e["req"] == started["req"] and e["count"] >= 3,
                    timeout=40,
                    event="chunk",
                )
                platform.send_control(agent_id, "interrupt", room_id=room)
                cancelled = await llm.wait_for(
                    event="stream_cancelled", req=started["req"], timeout=30
                )
                await platform.wait_until(lambda: status(platform, message) == "processed")
                # OpenCode's tasks are the subject's for the run, not a leak of the trial
                assert live_tasks() - adapter.resident_tasks <= before
                pid = adapter._opencode.pid
                home = adapter._opencode.config.working_directory
    assert cancelled["count"] < 80 and pid is not None
    assert not _exists(f"/proc/{pid}")  # the subject's run ended, and with it OpenCode
    assert not _exists(home)  # its home was made for the run, and removed


def _exists(path: str) -> bool:
    return Path(path).exists()
