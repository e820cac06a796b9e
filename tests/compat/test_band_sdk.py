"""The real, unmodified asyncio band-sdk 6.0.1 agent runs against the embedded platform.

The platform is served in-process (trio); the agent runs in a subprocess
(`band_sdk_peer.py`, asyncio), configured only through the platform's URLs,
agent id and key. One message waits in the room before the agent starts (the
backlog path: `GET /messages/next`), a second one is posted once it is up (the
live path: a `message_created` push). Both must be replied to and marked
`processed`, with no bad frame, unhandled route or unhandled event on the way.
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
vars (`MAX_CYCLE_SECONDS`, ...) and `PlatformSettings` reads `BAND_*` (wire.md §1)."""

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
)


def _peer_env(platform: Platform) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in _ENV_PASSTHROUGH}
    env["BAND_REST_URL"] = platform.info.rest_url
    env["BAND_WS_URL"] = platform.info.ws_url
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


async def _stop(proc: trio.Process) -> tuple[int, bool]:
    """SIGTERM the peer by its own pid, wait with a deadline, SIGKILL as a last resort.

    Returns (returncode, killed). Shielded: it also runs while the test is being cancelled.
    """
    killed = False
    with trio.CancelScope(shield=True):
        if proc.returncode is None:
            os.kill(proc.pid, signal.SIGTERM)
            with trio.move_on_after(STOP_DEADLINE):
                await proc.wait()
        if proc.returncode is None:
            killed = True
            os.kill(proc.pid, signal.SIGKILL)
            await proc.wait()
    assert proc.returncode is not None
    return proc.returncode, killed


def _rest_lines(platform: Platform, since: int = 0) -> list[str]:
    """The REST requests in the log from `since` on, as `"METHOD path status"` lines."""
    return [f"{e.method} {e.path} {e.status}" for e in platform.log(since) if e.kind == "rest"]


def _rest_after(platform: Platform, line: str) -> str:
    """The REST request that followed the first one matching `line` ("" if none yet)."""
    lines = _rest_lines(platform)
    if line not in lines:
        return ""
    rest = lines[lines.index(line) + 1 :]
    return rest[0] if rest else ""


class _Diagnostics:
    """What to show when something times out: the peer's stderr and the platform's log."""

    def __init__(self, platform: Platform, stderr_path: Path) -> None:
        self.platform = platform
        self.stderr_path = stderr_path

    def __call__(self) -> str:
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


async def _wait(
    platform: Platform,
    deadline: float,
    predicate: Callable[[], bool],
    why: str,
    diagnostics: _Diagnostics,
) -> None:
    try:
        with trio.fail_after(deadline):
            await platform.wait_until(predicate)
    except trio.TooSlowError:
        pytest.fail(f"timed out after {deadline}s waiting for {why}{diagnostics()}")


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

        def replied_and_processed(message_id: str, reply: str) -> Callable[[], bool]:
            def predicate() -> bool:
                status = platform.delivery(message_id).get(agent_id, {}).get("status")
                return status == "processed" and any(
                    m.sender_id == agent_id and m.content == reply
                    for m in platform.messages(room_id)
                )

            return predicate

        waiting_id = platform.post_message(room_id, user_id, "waiting task")
        assert platform.delivery(waiting_id)[agent_id]["status"] != "processed"

        stderr_path = tmp_path / "peer.stderr"
        diagnostics = _Diagnostics(platform, stderr_path)
        with stderr_path.open("wb") as stderr:
            proc = await trio.lowlevel.open_process(
                [sys.executable, str(PEER), agent_id, api_key],
                env=_peer_env(platform),
                cwd=tmp_path,
                stdin=subprocess.DEVNULL,
                stdout=stderr,
                stderr=stderr,
            )
        try:
            # Backlog path: band-sdk's room startup pass loops `GET /next` until 204.
            await _wait(
                platform,
                START_DEADLINE,
                replied_and_processed(waiting_id, "done: waiting task"),
                "the waiting message to be replied to and processed",
                diagnostics,
            )
            await _wait(
                platform,
                START_DEADLINE,
                lambda: _rest_after(
                    platform, f"POST {room}/messages/{waiting_id}/processed 200"
                ).startswith(f"GET {room}/messages/next 204"),
                "the room's startup pass to end (`GET /next` -> 204 after the mark)",
                diagnostics,
            )
            assert agent_id in platform.connected_agents()

            # Live path: the room is synced, so this one arrives as a `message_created` push.
            live_seq = len(platform.log())
            live_id = platform.post_message(room_id, user_id, "live task")
            await _wait(
                platform,
                LIVE_DEADLINE,
                replied_and_processed(live_id, "done: live task"),
                "the live message to be replied to and processed",
                diagnostics,
            )
        finally:
            returncode, killed = await _stop(proc)

        replies = [
            m.content
            for m in platform.messages(room_id)
            if m.sender_id == agent_id and m.sender_type == "Agent"
        ]
        assert replies == ["done: waiting task", "done: live task"], diagnostics()
        for message_id in (waiting_id, live_id):
            assert platform.delivery(message_id)[agent_id]["status"] == "processed"
            assert platform.delivery(message_id)[agent_id]["attempts"] == 1

        # The live message went over the socket as a `message_created` push, and band-sdk
        # claimed it straight from the push (no `GET /next` in between).
        pushes = [
            e.frame
            for e in platform.log(live_seq)
            if e.kind == "ws_out" and e.frame and '"message_created"' in e.frame
        ]
        assert pushes, diagnostics()
        assert live_id in pushes[0], diagnostics()
        first_request = _rest_lines(platform, live_seq)[0]
        assert first_request == f"POST {room}/messages/{live_id}/processing 200", diagnostics()

        stats = platform.stats
        assert {k: stats.get(k, 0) for k in _MUST_BE_ZERO} == dict.fromkeys(_MUST_BE_ZERO, 0), (
            diagnostics()
        )
        assert stats.get("requests", 0) > 0
        assert stats.get("ws_frames_in", 0) > 0

        assert not killed, f"the peer ignored SIGTERM{diagnostics()}"
        assert returncode == 0, f"the peer exited {returncode}{diagnostics()}"
        print(diagnostics())
