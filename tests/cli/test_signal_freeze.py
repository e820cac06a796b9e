"""The first signal freezes the heap for the collector: the stop's own garbage is
collected without rescanning what the process held (docs/benchmarks.md, the scale rows)."""

from __future__ import annotations

import gc
import signal

import trio

from band_trio import Policy
from band_trio.cli._signals import _Actions, _on_signals

DEADLINE = 10


async def test_the_first_signal_freezes_the_heap_and_stops_gracefully() -> None:
    gc.unfreeze()
    assert gc.get_freeze_count() == 0
    stopping = trio.Event()

    async def graceful() -> None:
        stopping.set()

    actions = _Actions("agent", graceful, lambda: None, Policy(), lambda: "")
    send, receive = trio.open_memory_channel[int](1)
    try:
        with trio.fail_after(DEADLINE):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_on_signals, receive, actions)
                await send.send(signal.SIGTERM)
                await stopping.wait()
                assert gc.get_freeze_count() > 0  # everything alive at the signal
                frozen = gc.get_freeze_count()
                gc.collect()  # a collection now leaves the frozen heap alone
                assert gc.get_freeze_count() >= frozen
                nursery.cancel_scope.cancel()
    finally:
        gc.unfreeze()
