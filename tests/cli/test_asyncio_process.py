"""`band-trio agent` running asyncio code (`run_asyncio`) as a real process: SIGTERM,
a second SIGTERM and kill -9 mid-turn, then a restart. Nothing is answered twice,
nothing is lost, no traceback, and the asyncio side is cancelled, not left running.
"""

from __future__ import annotations

import signal
from pathlib import Path

import trio

from band_trio.platform import Platform
from support import agent_env, band_trio, claims, replies, seeded, status

HERE = Path(__file__).resolve().parent
DEADLINE = 30
ARGV = ("agent", "--adapter", "asyncio_adapter:make")


def logged(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def test_sigterm_lets_the_asyncio_turn_finish_and_a_second_one_cancels_it(
    platform: Platform, tmp_path: Path
) -> None:
    _, room, user = seeded(platform)
    log = tmp_path / "asyncio.log"
    env = {**agent_env(platform), "ASYNCIO_ADAPTER_LOG": str(log)}
    with trio.fail_after(DEADLINE):
        async with band_trio(*ARGV, env=env, cwd=HERE) as cmd:
            short = platform.post_message(room, user, "short sleep=0.5")
            await platform.wait_until(lambda: logged(log) == ["started short sleep=0.5"])
            cmd.process.send_signal(signal.SIGTERM)  # it finishes inside the grace
            assert await cmd.process.wait() == 0
            assert b"Traceback" not in await cmd.rest_of_stderr()
        assert status(platform, short) == "processed"
        async with band_trio(*ARGV, env=env, cwd=HERE) as cmd:
            long = platform.post_message(room, user, "long sleep=600")
            await platform.wait_until(lambda: "started long sleep=600" in logged(log))
            cmd.process.send_signal(signal.SIGTERM)
            await cmd.line("stopping")
            cmd.process.send_signal(signal.SIGTERM)  # at once: the asyncio side is cancelled
            assert await cmd.process.wait() == 0
            assert b"Traceback" not in await cmd.rest_of_stderr()
    assert "cancelled long sleep=600" in logged(log)
    assert status(platform, long) == "processing"  # owed: a later run answers it
    assert replies(platform, room) == ["asyncio echo: short sleep=0.5"]


async def test_kill_9_mid_asyncio_turn_then_a_restart_answers_it_once(
    platform: Platform, tmp_path: Path
) -> None:
    _, room, user = seeded(platform)
    log = tmp_path / "asyncio.log"
    gate = tmp_path / "gate"
    env = {
        **agent_env(platform),
        "ASYNCIO_ADAPTER_LOG": str(log),
        "ASYNCIO_ADAPTER_GATE": str(gate),
    }
    with trio.fail_after(DEADLINE):
        async with band_trio(*ARGV, env=env, cwd=HERE) as cmd:
            message = platform.post_message(room, user, "again gate")
            await platform.wait_until(lambda: logged(log) == ["started again gate"])
            cmd.process.kill()  # the asyncio side waits at the gate: nothing posted yet
            assert await cmd.process.wait() == -signal.SIGKILL
        assert status(platform, message) == "processing"
        gate.touch()
        async with band_trio(*ARGV, env=env, cwd=HERE) as cmd:
            await platform.wait_until(lambda: status(platform, message) == "processed")
            cmd.process.send_signal(signal.SIGTERM)
            assert await cmd.process.wait() == 0
            assert b"Traceback" not in await cmd.rest_of_stderr()
    assert replies(platform, room) == ["asyncio echo: again gate"]  # once
    assert claims(platform, message) == 2  # the restart's replay, not a second answer
