"""The A2A and command targets over real processes: a cancelled forward cancels the
A2A task (a real a2a-sdk server) under the remote-stop deadline, or ends the
command's whole process group; what they take is a delivered forward."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import trio

from band_trio.bridge import A2ATargetConfig, CommandTargetConfig
from band_trio.platform import Platform
from peers import shared_a2a_peer
from support import pid_pipe

from ._helpers import identity, running_bridge
from .conftest import seeded


def _replies(platform: Platform, room_id: str) -> list[str]:
    agent_id = platform.info.agent_id
    return [m.content for m in platform.messages(room_id) if m.sender_id == agent_id]


async def test_an_a2a_forward_posts_the_agents_answer_and_a_cancel_cancels_its_task(
    platform: Platform,
) -> None:
    agent_id, room_id, user_id = seeded(platform)
    async with (
        shared_a2a_peer() as peer,
        running_bridge([identity(platform, A2ATargetConfig(url=peer.url))]) as run,
    ):
        ident = run.bridge.identities[agent_id]
        with trio.fail_after(15):
            await run.bridge.wait_until(lambda: ident.rooms_idle)
            platform.post_message(room_id, user_id, "mode=quick")
            await run.bridge.wait_until(lambda: ident.counters.delivered == 1)
            assert len(_replies(platform, room_id)) == 1  # the A2A answer, posted as the agent
            platform.post_message(room_id, user_id, "mode=normal chunks=400 delay=0.05")
            started = await peer.wait_for(
                lambda e: e["event"] == "execute_started" and "chunks=400" in e["text"]
            )
            platform.send_control(agent_id, "interrupt", room_id=room_id)
            await run.bridge.wait_until(lambda: ident.remote_stops.sent == 1 and ident.rooms_idle)
        cancel = peer.find(event="cancel_request", task_id=started["task_id"])
        assert cancel is not None
        assert ident.remote_stops.confirmed == 1  # the peer answered CANCELED in time
        assert ident.counters.cancelled == 1 and ident.counters.delivered == 1


async def test_a_command_forward_gets_the_envelope_on_stdin(
    platform: Platform, tmp_path: Path
) -> None:
    agent_id, room_id, user_id = seeded(platform)
    out = tmp_path / "envelope.json"
    script = f"import sys; open({str(out)!r}, 'wb').write(sys.stdin.buffer.read())"
    target = CommandTargetConfig(argv=[sys.executable, "-c", script])
    async with running_bridge([identity(platform, target)]) as run:
        ident = run.bridge.identities[agent_id]
        with trio.fail_after(10):
            await run.bridge.wait_until(lambda: ident.rooms_idle)
            message_id = platform.post_message(room_id, user_id, "to the command")
            await run.bridge.wait_until(lambda: ident.counters.delivered == 1)
    envelope = json.loads(out.read_bytes())
    assert envelope["event_type"] == "message_created" and envelope["payload"]["id"] == message_id


async def test_a_command_that_exits_nonzero_is_a_failed_forward(platform: Platform) -> None:
    agent_id, room_id, user_id = seeded(platform)
    target = CommandTargetConfig(argv=[sys.executable, "-c", "import sys; sys.exit(3)"])
    async with running_bridge([identity(platform, target)]) as run:
        ident = run.bridge.identities[agent_id]
        with trio.fail_after(10):
            await run.bridge.wait_until(lambda: ident.rooms_idle)
            platform.post_message(room_id, user_id, "fails")
            await run.bridge.wait_until(lambda: ident.counters.failed == 1)


async def test_a_cancelled_command_forward_ends_its_whole_process_group(
    platform: Platform, tmp_path: Path
) -> None:
    agent_id, room_id, user_id = seeded(platform)
    async with pid_pipe(tmp_path / "pids") as pipe:
        # the leader and a child of its own both report, then wait
        script = f'sleep 60 & echo $! >> "{pipe.path}"; echo $$ >> "{pipe.path}"; wait'
        target = CommandTargetConfig(argv=["sh", "-c", script])
        async with running_bridge([identity(platform, target)]) as run:
            ident = run.bridge.identities[agent_id]
            with trio.fail_after(10):
                await run.bridge.wait_until(lambda: ident.rooms_idle)
                platform.post_message(room_id, user_id, "long command")
                pids = await pipe.wait(2)
                platform.send_control(agent_id, "stop", room_id=room_id)
                await run.bridge.wait_until(lambda: ident.rooms_idle and ident.counters.cancelled)
    assert not [pid for pid in pids if _alive(pid)], "a process outlived the cancelled forward"


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, waiting for PID 1 to reap it, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"
