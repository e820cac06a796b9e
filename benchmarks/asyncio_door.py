"""How asyncio code should enter a trio turn: a loop in a thread, or trio-asyncio.

    .venv/bin/pip install trio-asyncio==0.16.0     # not in any extra: only this script uses it
    .venv/bin/python benchmarks/asyncio_door.py [--calls 2000] [--trials 200] [--turns 100]

Measures, for each mechanism, in one process, rounds alternating (thread, trio-asyncio,
trio-asyncio, thread, ...) so that the machine's drift hits both alike:

* **per call**: `await door(noop)` where `noop` is `async def noop(): return 1`
  (µs per call, sequential, after a warm-up);
* **cancel → asyncio task cancelled**: a trio scope is cancelled while the call
  waits in `asyncio.sleep`; from `scope.cancel()` to the task's `except
  CancelledError`, and to the trio side resuming (µs);
* **100 concurrent turns**: 100 trio tasks, each awaiting 10 calls of
  `asyncio.sleep(0.001)`; wall time (ms);
* **memory**: the RSS after the loop started and after the concurrent round
  (MiB, read from /proc/self/status; the first mechanism run pays the imports).

The thread door is band-trio's own (`contract.run_asyncio`, on a hand-built turn,
with everything it does: the current turn, the remote-work registration, the
copied context). The trio-asyncio door is `trio_asyncio.aio_as_trio(fn)(*args)`
inside `trio_asyncio.open_loop()`: its bare cost, no turn, no bound on a task
that ignores its cancel (which it would wait for forever: its `run_aio_future`
answers a cancel with `Abort.FAILED` and keeps waiting).

The floor: the same calls on a plain asyncio loop (`await noop()` inside a task;
the cancel from one asyncio task to another).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from band_trio.contract import Message, Threads, Turn, TurnControl, run_asyncio, turn_context

Door = Callable[..., Awaitable[Any]]
ROWS = (
    "rss started", "per call", "cancel → asyncio", "cancel → trio resumes",
    "100 concurrent turns", "rss after",
)  # fmt: skip


class _NoPort:
    async def post_message(self, content: str, mentions: Any) -> str:
        raise AssertionError

    async def post_event(self, content: str, message_type: str, metadata: Any) -> str:
        raise AssertionError

    async def history(self) -> list[Message]:
        raise AssertionError

    async def participants(self) -> list[Any]:
        raise AssertionError


def _turn(threads: Threads, n: int = 0) -> Turn:
    message = Message(id=f"m{n}", room_id="r", content="x", sender_id="u", sender_type="User")
    control = TurnControl("r", message.id, stop_grace=5.0, threads=threads)
    return Turn(message, _NoPort(), control=control)


def rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


async def noop() -> int:
    return 1


async def sleeper(marks: dict[str, float]) -> None:
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        marks["asyncio"] = time.perf_counter()
        raise


async def tiny_sleeps() -> None:
    for _ in range(10):
        await asyncio.sleep(0.001)


async def per_call(door: Door, calls: int) -> float:
    for _ in range(50):
        await door(noop)
    began = time.perf_counter()
    for _ in range(calls):
        await door(noop)
    return (time.perf_counter() - began) / calls * 1e6


async def one_cancel(door: Door) -> tuple[float, float]:
    marks: dict[str, float] = {}
    async with trio.open_nursery() as nursery:
        scope = trio.CancelScope()

        async def call() -> None:
            with scope:
                await door(sleeper, marks)
            marks["trio"] = time.perf_counter()

        nursery.start_soon(call)
        await trio.sleep(0.005)  # the task is in its sleep
        marks["cancel"] = time.perf_counter()
        scope.cancel()
    return (marks["asyncio"] - marks["cancel"]) * 1e6, (marks["trio"] - marks["cancel"]) * 1e6


async def concurrent(door: Door, turns: int) -> float:
    began = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(turns):
            nursery.start_soon(door, tiny_sleeps)
    return (time.perf_counter() - began) * 1e3


async def measure(door: Door, args: argparse.Namespace, out: dict[str, list[float]]) -> None:
    await door(noop)
    out["rss started"].append(rss_mib())
    out["per call"].append(await per_call(door, args.calls))
    for _ in range(args.trials):
        to_asyncio, to_trio = await one_cancel(door)
        out["cancel → asyncio"].append(to_asyncio)
        out["cancel → trio resumes"].append(to_trio)
    out["100 concurrent turns"].append(await concurrent(door, args.turns))
    out["rss after"].append(rss_mib())


async def thread_round(args: argparse.Namespace, out: dict[str, list[float]]) -> None:
    threads = Threads(4)
    turn = _turn(threads)

    async def door(fn: Callable[..., Awaitable[Any]], *a: Any) -> Any:
        with turn_context(turn):
            return await run_asyncio(fn, *a)

    try:
        await measure(door, args, out)
    finally:
        await threads.aclose(1.0)


async def trio_asyncio_round(args: argparse.Namespace, out: dict[str, list[float]]) -> None:
    # Imported here, never at the top: importing trio-asyncio patches asyncio for the
    # whole process (the suite imports every script, and its later tests broke).
    import trio_asyncio

    async with trio_asyncio.open_loop():

        async def door(fn: Callable[..., Awaitable[Any]], *a: Any) -> Any:
            return await trio_asyncio.aio_as_trio(fn)(*a)

        await measure(door, args, out)


def floor(args: argparse.Namespace) -> dict[str, float]:
    async def main() -> dict[str, float]:
        for _ in range(50):
            await noop()
        began = time.perf_counter()
        for _ in range(args.calls):
            await asyncio.get_running_loop().create_task(noop())
        task_call = (time.perf_counter() - began) / args.calls * 1e6
        cancels = []
        for _ in range(args.trials):
            marks: dict[str, float] = {}
            task = asyncio.get_running_loop().create_task(sleeper(marks))
            await asyncio.sleep(0.005)
            marks["cancel"] = time.perf_counter()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            cancels.append((marks["asyncio"] - marks["cancel"]) * 1e6)
        return {"per call": task_call, "cancel → asyncio": statistics.median(cancels)}

    return asyncio.run(main())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    results: dict[str, dict[str, list[float]]] = {}
    order = ["thread", "trio-asyncio", "trio-asyncio", "thread"] * (args.rounds // 4 + 1)
    for name in order[: args.rounds]:
        out = results.setdefault(name, {})
        for key in ROWS:
            out.setdefault(key, [])
        if name == "thread":
            trio.run(thread_round, args, out)
        else:
            trio.run(trio_asyncio_round, args, out)
    base = floor(args)
    units = {"per call": "µs", "cancel → asyncio": "µs p50", "cancel → trio resumes": "µs p50",
             "100 concurrent turns": "ms", "rss started": "MiB", "rss after": "MiB"}  # fmt: skip
    print(f"{'':26} {'loop in a thread':>18} {'trio-asyncio':>14} {'plain asyncio':>14}")
    for key, unit in units.items():
        cells = []
        for name in ("thread", "trio-asyncio"):
            values = results[name][key]
            cells.append(f"{statistics.median(values):>10.1f}")
        plain = f"{base[key]:.1f}" if key in base else "—"
        print(f"{key + ' (' + unit + ')':26} {cells[0]:>18} {cells[1]:>14} {plain:>14}")
    for name in ("thread", "trio-asyncio"):
        cancels = sorted(results[name]["cancel → trio resumes"])
        p99 = cancels[int(len(cancels) * 0.99) - 1]
        print(f"{name}: cancel → trio resumes p99 {p99:.1f} µs over {len(cancels)} trials")


if __name__ == "__main__":
    main()
