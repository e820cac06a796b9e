"""`band-trio agent` as a real process: SIGTERM and kill -9 in each phase, then a restart.

Whatever the phase, afterwards nothing is answered twice, nothing is lost, no
traceback reaches the user, and the process exits by itself.
"""

from __future__ import annotations

import functools
import signal
from pathlib import Path

import httpx2
import trio
from test_commands import process, read_until

from band_trio.platform import Platform
from ports import free_port
from support import (
    agent_env,
    all_processed,
    claims,
    envelope,
    pid_pipe,
    rooms_with_the_agent,
    status,
)

DEADLINE = 30


def agent_replies(platform: Platform, room_id: str) -> list[str]:
    agent_id = platform.info.agent_id
    return [m.content for m in platform.messages(room_id) if m.sender_id == agent_id]


async def stderr_of(proc: trio.Process) -> bytes:
    """What the process wrote to stderr, once it has exited."""
    assert proc.stderr is not None
    seen = b""
    while chunk := await proc.stderr.receive_some():
        seen += chunk
    return seen


async def test_sigterm_with_turns_in_three_rooms_answers_each_exactly_once(
    platform: Platform,
) -> None:
    info = platform.info
    assert info.user_id and info.agent_id
    rooms = rooms_with_the_agent(platform, 3)
    env = agent_env(platform)
    with trio.fail_after(DEADLINE):
        async with process("agent", env=env) as proc:
            await platform.wait_until(lambda: info.agent_id in platform.connected_agents())
            posted = [platform.post_message(r, info.user_id, "think sleep=1") for r in rooms]
            await platform.wait_until(
                lambda: all(status(platform, m) == "processing" for m in posted)
            )
            proc.send_signal(signal.SIGTERM)  # every turn finishes inside the grace
            assert await proc.wait() == 0
            assert b"Traceback" not in await stderr_of(proc)
        assert [status(platform, m) for m in posted] == ["processed"] * 3
        async with process("agent", env=env) as again:  # a restart answers only what is new
            newer = [platform.post_message(r, info.user_id, "and now?") for r in rooms]
            await platform.wait_until(all_processed(platform, newer))
            again.send_signal(signal.SIGTERM)
            assert await again.wait() == 0
    for room in rooms:
        assert agent_replies(platform, room) == ["echo: think sleep=1", "echo: and now?"]
    assert platform.stats["reopened"] == 0  # the restart claimed nothing it had consumed


async def test_sigterm_before_the_key_is_checked_exits_at_once(platform: Platform) -> None:
    hold = platform.faults.hold_rest("me")
    with trio.fail_after(DEADLINE):
        async with process("agent", env=agent_env(platform)) as proc:
            await hold.arrived.wait()
            proc.send_signal(signal.SIGTERM)
            assert await proc.wait() == 0
            assert b"Traceback" not in await stderr_of(proc)
    assert platform.stats["connections_opened"] == 0


async def test_sigterm_during_the_room_list_exits_and_a_restart_serves(
    platform: Platform,
) -> None:
    info = platform.info
    assert info.room_id and info.user_id
    hold = platform.faults.hold_rest("chats")
    waiting = platform.post_message(info.room_id, info.user_id, "posted before any agent")
    with trio.fail_after(DEADLINE):
        async with process("agent", env=agent_env(platform)) as proc:
            await hold.arrived.wait()
            proc.send_signal(signal.SIGTERM)
            assert await proc.wait() == 0
            assert b"Traceback" not in await stderr_of(proc)
        hold.release()
        assert status(platform, waiting) == "delivered"  # nobody took it
        async with process("agent", env=agent_env(platform)) as again:
            await platform.wait_until(lambda: status(platform, waiting) == "processed")
            again.send_signal(signal.SIGTERM)
            assert await again.wait() == 0
    assert agent_replies(platform, info.room_id) == ["echo: posted before any agent"]


async def test_sigterm_while_reconnecting_exits(platform: Platform) -> None:
    info = platform.info
    assert info.agent_id
    with trio.fail_after(DEADLINE):
        async with process("agent", env=agent_env(platform)) as proc:
            await platform.wait_until(lambda: info.agent_id in platform.connected_agents())
            platform.faults.refuse_upgrades(1000, 503)
            assert platform.faults.drop_socket(info.agent_id)
            await platform.wait_until(lambda: platform.stats["upgrades_refused"] >= 1)
            proc.send_signal(signal.SIGTERM)
            assert await proc.wait() == 0
            assert b"Traceback" not in await stderr_of(proc)


async def test_kill_9_mid_turn_then_a_restart_answers_it_once(platform: Platform) -> None:
    info = platform.info
    assert info.room_id and info.user_id
    with trio.fail_after(DEADLINE):
        async with process("agent", env=agent_env(platform)) as proc:
            message = platform.post_message(info.room_id, info.user_id, "long sleep=600")
            await platform.wait_until(lambda: status(platform, message) == "processing")
            proc.kill()
            assert await proc.wait() == -signal.SIGKILL
        assert status(platform, message) == "processing"
        async with process("agent", env=agent_env(platform)) as again:
            # the replay claims it again and runs it (600 s of it): stop that at once
            await platform.wait_until(lambda: claims(platform, message) == 2)
            again.send_signal(signal.SIGTERM)
            assert again.stderr is not None
            await read_until(again.stderr, b"stopping")
            again.send_signal(signal.SIGTERM)
            assert await again.wait() == 0
    assert agent_replies(platform, info.room_id) == []  # never answered twice, nor half
    assert status(platform, message) == "processing"  # still owed: a later run answers it
    assert platform.delivery(message)[info.agent_id or ""]["attempts"] == 1  # same attempt
    assert platform.stats["reopened"] == 0


async def test_a_second_sigterm_mid_command_ends_the_whole_process_tree(
    platform: Platform, tmp_path: Path
) -> None:
    """`band-trio agent --adapter band_trio.adapters:command`, a command with
    grandchildren running: SIGTERM (graceful: the turn may finish) and SIGTERM again
    (now) → the agent exits, every process of the tree is gone, the message is left
    `processing` for a later run, and a restart answers it once."""
    info = platform.info
    assert info.room_id and info.user_id
    pids = tmp_path / "pids"
    script = tmp_path / "think.sh"
    script.write_text(
        "#!/bin/sh\n"
        f'if [ -e "{tmp_path}/quick" ]; then echo answered; exit 0; fi\n'
        f'sleep 30 & echo $! >> "{pids}"\n'
        f'sleep 30 & echo $! >> "{pids}"\n'
        f'echo $$ >> "{pids}"\n'
        "wait\n"
    )
    script.chmod(0o755)
    env = {**agent_env(platform), "BAND_COMMAND": str(script)}
    adapter = ["--adapter", "band_trio.adapters:command"]
    with trio.fail_after(DEADLINE):
        async with process("agent", *adapter, env=env) as proc, pid_pipe(pids) as pipe:
            await platform.wait_until(lambda: info.agent_id in platform.connected_agents())
            message = platform.post_message(info.room_id, info.user_id, "think")
            tree = await pipe.wait(3)
            proc.send_signal(signal.SIGTERM)
            assert proc.stderr is not None
            await read_until(proc.stderr, b"stopping")
            proc.send_signal(signal.SIGTERM)
            assert await proc.wait() == 0
            assert b"Traceback" not in await stderr_of(proc)
        assert [pid for pid in tree if _alive(pid)] == []
        assert status(platform, message) == "processing"
        (tmp_path / "quick").touch()
        async with process("agent", *adapter, env=env) as again:
            await platform.wait_until(lambda: status(platform, message) == "processed")
            again.send_signal(signal.SIGTERM)
            assert await again.wait() == 0
    assert agent_replies(platform, info.room_id) == ["answered"]


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie waiting for its reaper does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat[stat.rfind(")") + 2] not in "ZX"


async def test_a_first_sigint_says_which_turns_it_waits_for_how_long_and_when_done(
    platform: Platform,
) -> None:
    """At the default log level: the turns the graceful stop waits for and the grace,
    then that they finished (not 16 s of "stopping (again to force)" alone)."""
    info = platform.info
    assert info.user_id and info.room_id
    with trio.fail_after(DEADLINE):
        async with process("agent", env=agent_env(platform)) as proc:
            await platform.wait_until(lambda: info.agent_id in platform.connected_agents())
            posted = platform.post_message(info.room_id, info.user_id, "think sleep=1")
            await platform.wait_until(lambda: status(platform, posted) == "processing")
            proc.send_signal(signal.SIGINT)
            assert await proc.wait() == 0
            err = (await stderr_of(proc)).decode()
    assert status(platform, posted) == "processed", err
    _says_it_waited(err, "30s", f"room {info.room_id}: {posted}")


async def test_a_first_sigint_of_the_host_says_which_turns_it_waits_for_and_when_done(
    platform: Platform,
) -> None:
    """`band-trio host` as `agent`: the turns its graceful stop waits for and its grace
    (`BridgePolicy.health_grace`, 1 s), then that they finished, at the default level."""
    info = platform.info
    assert info.user_id and info.room_id and info.agent_id
    token = "host-token-0123456789abcdef0123456789"
    port = free_port()
    env = {**agent_env(platform), "BAND_HOST_TOKEN": token}
    args = ["host", "--adapter", "band_trio.adapters:DemoAdapter"]
    with trio.fail_after(DEADLINE):
        async with process(*args, "--listen", f"127.0.0.1:{port}", env=env) as proc:
            assert proc.stderr is not None
            await read_until(proc.stderr, b"serving on")
            posted = platform.post_message(info.room_id, info.user_id, "sleep=0.5 hello")
            body = envelope(platform, posted, "sleep=0.5 hello")
            bearer = {"authorization": f"Bearer {token}"}
            async with (
                httpx2.AsyncClient(headers=bearer, timeout=None) as client,
                trio.open_nursery() as nursery,
            ):
                post = functools.partial(client.post, f"http://127.0.0.1:{port}/", json=body)
                nursery.start_soon(post)
                await platform.wait_until(lambda: status(platform, posted) == "processing")
                proc.send_signal(signal.SIGINT)
            assert await proc.wait() == 0
            err = (await stderr_of(proc)).decode()
    assert status(platform, posted) == "processed", err
    _says_it_waited(err, "1s", f"room {info.room_id}: {posted}")
    assert "still busy" not in err and "Traceback" not in err, err


def _says_it_waited(err: str, grace: str, unit: str) -> None:
    """One WARNING naming the one running turn (`unit`) and the grace, then one line
    saying it finished within it, in that order."""
    lines = err.splitlines()
    waiting = [i for i, x in enumerate(lines) if f"stopping: waiting up to {grace}" in x]
    done = [i for i, x in enumerate(lines) if "stopped gracefully" in x]
    assert len(waiting) == 1 and len(done) == 1 and waiting[0] < done[0], err
    assert "WARNING" in lines[waiting[0]] and "1 running turn" in lines[waiting[0]], err
    assert unit in lines[waiting[0]], err
    assert "finished after" in lines[done[0]], err
