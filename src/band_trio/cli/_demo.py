"""`band-trio demo`: the embedded platform, one agent, a few turns and the three signals.

Everything runs in this one process over real loopback sockets: the platform
serves REST and the websocket, the agent connects to it exactly as it would to
the real platform. Timings are `perf_counter` deltas taken on both sides.
"""

from __future__ import annotations

import argparse
import math
import signal
import sys
import time
from typing import TYPE_CHECKING, Any

import trio

from ._exits import EXIT_INTERRUPTED

if TYPE_CHECKING:
    from ..platform import Platform

__all__ = ["add_parser", "run_demo"]

_DEADLINE = 12.0


def add_parser(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "demo", help="run the embedded platform and a demo agent, and show turns and signals"
    )
    parser.add_argument(
        "--console",
        action="store_true",
        help="then keep the platform and the agent running, with the browser console, until Ctrl-C",
    )
    parser.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    if trio.run(_until_signalled, args.console):
        print("band-trio: interrupted", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    return 0


async def _until_signalled(console: bool) -> bool:
    """Run the demo; a SIGINT/SIGTERM cancels it (the agent and the platform close
    as at its end) and returns True. Without the receiver, trio raised the
    `KeyboardInterrupt` in whichever task was running: a server's task mid-handshake
    among them, whose own cleanup then failed over it (a traceback and exit 1, not
    130). `--console`'s wait for Ctrl-C has a receiver of its own, which takes the
    signal while it is open (exit 0)."""
    interrupted = False
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:

            async def watch() -> None:
                nonlocal interrupted
                async for _ in signals:
                    interrupted = True
                    nursery.cancel_scope.cancel(reason="band-trio demo: a signal")
                    return

            nursery.start_soon(watch)
            await run_demo(console)
            nursery.cancel_scope.cancel(reason="band-trio demo: done")
    return interrupted


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:8.1f} ms"


def _reply_to(platform: Platform, room_id: str, content: str) -> str | None:
    for message in platform.messages(room_id):
        if message.content == f"echo: {content}":
            return message.id
    return None


async def run_demo(console: bool = False) -> None:
    # here, not at the top: every other command (an agent's start) need not load these
    from ..adapters import DemoAdapter
    from ..platform import open_platform
    from ..runtime import Agent
    from ..testing import RecordingAdapter

    began = time.perf_counter()
    with trio.fail_after(_DEADLINE) as scripted:
        async with (
            open_platform(seed=True, console=console) as platform,
            trio.open_nursery() as nursery,
        ):
            info = platform.info
            assert info.agent_id and info.api_key and info.room_id and info.user_id
            room, user, agent_id = info.room_id, info.user_id, info.agent_id
            adapter = RecordingAdapter(DemoAdapter().on_turn)
            agent = Agent(
                adapter,
                agent_id=agent_id,
                api_key=info.api_key,
                rest_url=info.rest_url,
                ws_url=info.ws_url,
            )
            print(f"platform  {info.rest_url}  (websocket {info.ws_url})")
            await nursery.start(agent.run)
            print(f"agent     {info.agent_id} joined room {room}\n")

            async def turn(content: str) -> None:
                sent = time.perf_counter()
                platform.post_message(room, user, content)
                await platform.wait_until(lambda: _reply_to(platform, room, content) is not None)
                took = _ms(time.perf_counter() - sent)
                print(f"  {content!r:34} -> {'echo: ' + content!r:40} {took}")

            print("turns (message posted -> reply on the platform):")
            for content in ("hello", "what can you do?", "think it over sleep=0.5"):
                await turn(content)

            print("\nsignals (signal sent -> effect):")
            long = platform.post_message(room, user, "a long reasoning cycle sleep=30")
            await adapter.wait_for(lambda: long in adapter.entered)
            sent = time.perf_counter()
            platform.send_control(agent_id, "interrupt", room_id=room, reason="demo")
            await platform.wait_until(lambda: _status(platform, long, agent_id) == "processed")
            print(
                f"  interrupt: turn cancelled {_ms(adapter.cancelled_at[long] - sent)}, "
                f"message consumed (processed) {_ms(time.perf_counter() - sent)}, no reply"
            )

            held = platform.post_message(room, user, "work that will be stopped sleep=0.3")
            await adapter.wait_for(lambda: held in adapter.entered)
            sent = time.perf_counter()
            platform.send_control(agent_id, "stop", room_id=room, reason="demo")
            await adapter.wait_for(lambda: held in adapter.cancelled_at)
            print(
                f"  stop:      turn cancelled {_ms(adapter.cancelled_at[held] - sent)}, "
                f"message left {_status(platform, held, agent_id)!r}"
            )
            meanwhile = "posted while stopped"
            platform.post_message(room, user, meanwhile)

            sent = time.perf_counter()
            platform.send_control(agent_id, "play", room_id=room, reason="demo")
            await adapter.wait_for(lambda: len(adapter.entered[held]) == 2)
            resumed = adapter.entered[held][1] - sent
            await platform.wait_until(lambda: _reply_to(platform, room, meanwhile) is not None)
            print(
                f"  play:      stopped turn re-entered {_ms(resumed)}, it and the message "
                f"posted meanwhile answered {_ms(time.perf_counter() - sent)}"
            )

            if console:
                scripted.deadline = math.inf  # a person drives it from here on
                await _console(platform.info.console_url or "")
            result = await agent.stop()
            print(
                f"\nagent stopped ({'graceful' if result.graceful else 'cancelled turns'}); "
                f"demo took {time.perf_counter() - began:.2f} s"
            )
            nursery.cancel_scope.cancel()


async def _console(url: str) -> None:
    """Serve until SIGINT/SIGTERM (exit 0). The receiver is open before the line
    saying so is printed: a Ctrl-C right after it is a stop, not a KeyboardInterrupt."""
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        print(
            f"\nconsole   {url}\n          open it in a browser; Ctrl-C stops the agent and "
            "platform",
            flush=True,
        )
        async for _ in signals:
            break


def _status(platform: Platform, message_id: str, agent_id: str) -> str | None:
    entry = platform.delivery(message_id).get(agent_id)
    return None if entry is None else str(entry["status"])
