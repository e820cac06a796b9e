"""The bench's band-trio subject with a per-hop trace: where a signal's time goes.

    BAND_HOP_TRACE=/tmp/hops.json band-trio agent --adapter _hop_subject:adapter

(`benchmarks/` on `PYTHONPATH`; `benchmarks/hot_path.py --trace FILE` does this.)
A trio `Instrument` stamps every task step (`time.perf_counter()`, the clock the
platform stamps its frames with), and the socket's `receive_some`/`send_all`
and a few of band-trio's functions on a signal's path are wrapped to stamp
their entry. The stamps are kept in memory (a write would perturb what follows)
and written as JSON at exit.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import trio

from band_trio.bench import _trio_subject

EVENTS: list[tuple[float, str, str]] = []
_now = time.perf_counter


class _Steps(trio.abc.Instrument):
    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        EVENTS.append((_now(), "step", task.name))

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        EVENTS.append((_now(), "/step", task.name))

    def after_io_wait(self, timeout: float) -> None:
        EVENTS.append((_now(), "woke", ""))


def _stamp_async(owner: Any, name: str, label: str) -> None:
    original = getattr(owner, name)

    @functools.wraps(original)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        EVENTS.append((_now(), label, ""))
        try:
            return await original(*args, **kwargs)
        finally:
            EVENTS.append((_now(), "/" + label, ""))

    setattr(owner, name, wrapper)


def _stamp_sync(owner: Any, name: str, label: str) -> None:
    original: Callable[..., Any] = getattr(owner, name)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        EVENTS.append((_now(), label, ""))
        try:
            return original(*args, **kwargs)
        finally:
            EVENTS.append((_now(), "/" + label, ""))

    setattr(owner, name, wrapper)


def _install() -> None:
    from band_trio.link import _http_pool, _lanes, _rest
    from band_trio.runtime import _connection, _control, _room, _settle, _turn, _turn_state

    _stamp_async(trio.SocketStream, "send_all", "send_all")
    _stamp_async(trio.SocketStream, "receive_some", "receive_some")
    _stamp_sync(_connection.Connection, "on_push", "on_push")
    _stamp_sync(_control.ControlLane, "apply", "apply")
    _stamp_sync(_room.Room, "interrupt", "room")
    _stamp_sync(_room.Room, "stop", "room")
    _stamp_sync(_turn_state.ActiveTurn, "abort", "abort")
    _stamp_async(_rest.RestClient, "_call", "rest_call")
    _stamp_async(_lanes.Lanes, "acquire", "lanes")
    _stamp_async(_http_pool.HttpPool, "request", "pool")
    _stamp_async(_http_pool.HttpPool, "_exchange", "exchange")
    _stamp_async(_turn, "settle", "settle")
    _stamp_async(_settle, "report_idle", "report_idle")
    _stamp_async(_settle, "_mark_processed", "mark")
    original = _trio_subject.observe

    def observe(kind: str, message_id: str, n: int | None = None) -> None:
        EVENTS.append((_now(), "observe:" + kind, message_id))
        original(kind, message_id, n) if n is not None else original(kind, message_id)

    _trio_subject.observe = observe  # type: ignore[assignment]


class HopAdapter(_trio_subject.BenchAdapter):
    @asynccontextmanager
    async def _traced(self) -> AsyncIterator[None]:
        trio.lowlevel.add_instrument(_Steps())
        async with super().lifespan():
            yield

    def lifespan(self) -> Any:
        return self._traced()


def _dump() -> None:
    path = os.environ.get("BAND_HOP_TRACE")
    if path:
        with open(path, "w") as out:
            json.dump(EVENTS, out)


def adapter() -> HopAdapter:
    _install()
    atexit.register(_dump)
    _trio_subject.exit_with_driver()
    return HopAdapter()
