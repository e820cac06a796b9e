"""The real, unmodified asyncio band-sdk 6.0.1 agent runs against the embedded platform.

The platform is served in-process (trio); the agent runs in a subprocess
(`band_sdk_peer.py`, asyncio), configured only through the platform's URLs,
agent id and key. One message waits in the room before the agent starts: band-sdk
takes it from the backlog (`GET /messages/next`). Once the agent is up and idle a
second one is posted: band-sdk takes it from its `message_created` push. Both must
be replied to and marked `processed`, with no bad frame, unhandled route or
unhandled event on the way, and the agent must exit cleanly on SIGTERM.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from band_trio.platform import Platform, open_platform

PEER = Path(__file__).with_name("band_sdk_peer.py")

START_DEADLINE = 10.0
"""Interpreter + band-sdk import + `/me` + socket + joins + the backlog message."""
LIVE_DEADLINE = 5.0
STOP_DEADLINE = 5.0

_ENV_PASSTHROUGH = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "SYSTEMROOT")
"""All the peer inherits. Nothing else: band-sdk's `SessionConfig` reads unprefixed env
vars (`MAX_CYCLE_SECONDS`, ...) and `PlatformSettings` reads `BAND_*`."""

_MUST_BE_ZERO = (
    "bad_frames",
    "frame_errors",
    "unhandled_routes",
    "unhandled_events",
    "errors",
    "socket_errors",
    "upgrades_refused",
    "joins_refused",
    "pushes_unjoined",
    "reopened",  # band-sdk re-opens no processed message either (the documented rule)
)


def _peer_env(platform: Platform) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in _ENV_PASSTHROUGH}
    env["BAND_REST_URL"] = platform.info.rest_url
    env["BAND_WS_URL"] = platform.info.ws_url
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _rest_lines(platform: Platform, since: int = 0) -> list[str]:
    """The REST requests in the log from `since` on, as `"METHOD path status"` lines."""
    return [f"{e.method} {e.path} {e.status}" for e in platform.log(since) if e.kind == "rest"]


def _count_after(lines: list[str], mark: str, line: str) -> int:
    """How often `line` occurs after the first `mark` in `lines` (-1 if `mark` is absent)."""
    if mark not in lines:
        return -1
    return lines[lines.index(mark) + 1 :].count(line)


class _Peer:
    """The band-sdk subprocess, seen from the test: wait on the platform, stop, diagnose."""

    def __init__(self, platform: Platform, proc: trio.Process, stderr_path: Path) -> None:
        self.platform = platform
        self.proc = proc
        self.stderr_path = stderr_path

    async def wait(self, deadline: float, predicate: Callable[[], bool], why: str) -> None:
        """`platform.wait_until(predicate)` under a deadline; fail at once if the peer exits."""
        exited = False

        async def watch_exit(nursery: trio.Nursery) -> None:
            nonlocal exited
            await self.proc.wait()
            exited = True
            nursery.cancel_scope.cancel()

        try:
            with trio.fail_after(deadline):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(watch_exit, nursery)
                    await self.platform.wait_until(predicate)
                    nursery.cancel_scope.cancel()
        except trio.TooSlowError:
            pytest.fail(f"timed out after {deadline}s waiting for {why}{self.diagnostics()}")
        if exited and not predicate():
            pytest.fail(
                f"the peer exited ({self.proc.returncode}) while waiting for {why}"
                f"{self.diagnostics()}"
            )

    async def stop(self) -> bool:
        """SIGTERM it by its own pid, wait with a deadline, SIGKILL as a last resort.

        Returns whether it had to be killed. Shielded, as it also runs when the test
        is being cancelled.
        """
        killed = False
        with trio.CancelScope(shield=True):
            if self.proc.returncode is None:
                os.kill(self.proc.pid, signal.SIGTERM)
                with trio.move_on_after(STOP_DEADLINE):
                    await self.proc.wait()
            if self.proc.returncode is None:
                killed = True
                os.kill(self.proc.pid, signal.SIGKILL)
                await self.proc.wait()
        return killed

    def diagnostics(self) -> str:
        """The platform's stats and request log, and the peer's stderr (band-sdk's log)."""
        stderr = self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else ""
        entries = self.platform.log()
        lines = [
            f"{e.seq} {e.kind} {e.method or ''} {e.path or ''} {e.status or ''} "
            f"{(e.frame or e.body or '')[:300]}"
            for e in entries[-60:]
        ]
        return (
            f"\n--- platform stats ---\n{self.platform.stats}"
            f"\n--- platform log (last {len(lines)} of {len(entries)}) ---\n"
            + "\n".join(lines)
            + f"\n--- band-sdk peer stderr (last 6000 chars) ---\n{stderr[-6000:]}"
        )


@pytest.mark.long(9)
async def test_band_sdk_agent_replies_to_waiting_and_live_messages(tmp_path: Path) -> None:
    async with open_platform(seed=True) as platform:
        info = platform.info
        agent_id, api_key, user_id, room_id = (
            info.agent_id,
            info.api_key,
            info.user_id,
            info.room_id,
        )
        assert agent_id is not None
        assert api_key is not None
        assert user_id is not None
        assert room_id is not None
        room = f"/api/v1/agent/chats/{room_id}"
        next_empty = f"GET {room}/messages/next 204"

        def replies() -> list[str]:
            return [
                m.content
                for m in platform.messages(room_id)
                if m.sender_id == agent_id and m.sender_type == "Agent"
            ]

        def status(message_id: str) -> object:
            return platform.delivery(message_id).get(agent_id, {}).get("status")

        def done(message_id: str, expected_replies: list[str]) -> Callable[[], bool]:
            return lambda: status(message_id) == "processed" and replies() == expected_replies

        def idle_after(mark: str, empty_polls: int) -> Callable[[], bool]:
            return lambda: _count_after(_rest_lines(platform), mark, next_empty) >= empty_polls

        waiting_id = platform.post_message(room_id, user_id, "waiting task")
        assert status(waiting_id) == "delivered"
        expected = ["done: waiting task"]

        stderr_path = tmp_path / "peer.stderr"
        with stderr_path.open("wb") as stderr:
            proc = await trio.lowlevel.open_process(
                [sys.executable, str(PEER), agent_id, api_key],
                env=_peer_env(platform),
                cwd=tmp_path,
                stdin=subprocess.DEVNULL,
                stdout=stderr,
                stderr=stderr,
            )
        peer = _Peer(platform, proc, stderr_path)
        try:
            await peer.wait(
                START_DEADLINE,
                done(waiting_id, expected),
                "the waiting message to be replied to and processed",
            )
            assert agent_id in platform.connected_agents()
            # Idle means: the room's startup pass has ended on an empty `/next`, and so
            # has the extra resync that band-sdk queues when it admits the room.
            mark, empty_polls = f"POST {room}/messages/{waiting_id}/processed 200", 2

            # At most two tries: band-sdk's first periodic resync falls uniform(0, 60) s
            # after the startup pass; if it lands in the few ms between the post and the
            # push, it takes the message from `/next` instead. It cannot do so twice.
            live_ids: list[str] = []
            for _ in range(2):
                await peer.wait(LIVE_DEADLINE, idle_after(mark, empty_polls), "an idle agent")
                seq = len(platform.log())
                live_id = platform.post_message(room_id, user_id, "live task")
                live_ids.append(live_id)
                expected.append("done: live task")
                await peer.wait(
                    LIVE_DEADLINE,
                    done(live_id, expected),
                    "the live message to be replied to and processed",
                )
                claim = f"POST {room}/messages/{live_id}/processing 200"
                if _rest_lines(platform, seq)[0] == claim:
                    break  # claimed straight from the push, with no `/next` in between
                mark, empty_polls = f"POST {room}/messages/{live_id}/processed 200", 1
            else:
                pytest.fail(f"band-sdk never took a live message from its push{peer.diagnostics()}")
        finally:
            killed = await peer.stop()
        with trio.fail_after(STOP_DEADLINE):
            await platform.wait_until(lambda: platform.stats["connections_live"] == 0)

        assert not killed, f"the peer ignored SIGTERM{peer.diagnostics()}"
        assert proc.returncode == 0, f"the peer exited {proc.returncode}{peer.diagnostics()}"

        assert replies() == expected, peer.diagnostics()
        for message_id in (waiting_id, *live_ids):
            assert platform.delivery(message_id)[agent_id] == {"status": "processed", "attempts": 1}

        # The live message went out as a `message_created` push on the room topic.
        pushes = [
            e.frame
            for e in platform.log(seq)
            if e.kind == "ws_out" and e.frame and '"message_created"' in e.frame
        ]
        assert pushes, peer.diagnostics()
        assert f'"id":"{live_id}"' in pushes[0], peer.diagnostics()

        stats = platform.stats
        counted = {name: stats.get(name, 0) for name in _MUST_BE_ZERO}
        assert counted == dict.fromkeys(_MUST_BE_ZERO, 0), peer.diagnostics()
