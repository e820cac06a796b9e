"""The agent: `run()` owns the whole tree and performs its own shutdown.

    Agent.run                       `adapter.lifespan()`, then the root nursery in it
    ├── rooms host (`Rooms.run`)    one task per room; drains and ends on request
    ├── stopper                     waits for `stop()`; then asks, in order:
    │                               the rooms to settle, the link to close
    └── the link (`Link.run`)       the key, then connections, joins, reconnects

`stop()` only asks: it records the request and awaits the result that `run()`
publishes. So it works in every phase — before the key is checked, while
connecting, listing or joining rooms, reconnecting, running — a second
concurrent call shares the first's result, and cancelling a caller of `stop()`
does not cancel the stop. Nothing here is published for another task to
cancel.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

import trio

from .. import errors
from ..contract import Adapter, Cutoff, Threads, ThreadStats
from ..link import RestClient, SocketStats, check_rest_url, check_ws_url
from ..observe import hooks as observe
from ..policy import BusyPolicy, Policy, WhileBusy
from ..wire import RefCounter
from ._context import Changes, Journal, RoomContext
from ._control import ControlLane, SignalCounts
from ._ledger import Ledger
from ._link_supervisor import Link, LinkEnd, LinkSettings
from ._results import Overrun, StopResult, UnsettledMark
from ._rooms import Rooms
from ._stops import RemoteStopLog, RemoteStopStats
from ._turn_state import AbortKind
from ._view import RoomView

__all__ = ["Agent"]


class _Run:
    """One call of `Agent.run`: the stop request, and the result it answers with."""

    def __init__(self) -> None:
        self.stop_requested = trio.Event()
        self.hard_reason: str | None = None
        """Set by `hard_stop`: the stop skips the grace, its shielded waits cut short."""
        self.result: StopResult | None = None
        self.published = trio.Event()

    def publish(self, result: StopResult) -> None:
        if self.result is None:
            self.result = result
            self.published.set()


class Agent:
    """A Band agent running `adapter` in every room it is a participant of.

    Run it in a nursery: `await nursery.start(agent.run)` returns once the
    agent is connected and its rooms are joined; `await agent.stop()` stops it.
    """

    def __init__(
        self,
        adapter: Adapter,
        *,
        agent_id: str,
        api_key: str,
        rest_url: str,
        ws_url: str,
        policy: Policy | None = None,
        while_busy: BusyPolicy | WhileBusy | str | None = None,
        reject_conflict: bool = False,
    ) -> None:
        for name, value in (
            ("agent_id", agent_id),
            ("api_key", api_key),
            ("rest_url", rest_url),
            ("ws_url", ws_url),
        ):
            if not value:
                raise errors.ConfigurationError(f"{name} is required")
        check_rest_url(rest_url)
        check_ws_url(ws_url)
        self.adapter = adapter
        self.agent_id = agent_id
        self.rest_url = rest_url
        self.ws_url = ws_url
        self.policy = policy or Policy()
        if while_busy is None or isinstance(while_busy, BusyPolicy):
            self.while_busy = while_busy or BusyPolicy()
        else:
            self.while_busy = BusyPolicy(default=while_busy)  # type: ignore[arg-type]
        """What a room does with a message that arrives while a turn runs."""
        self.stats = SocketStats()
        """Counters of the websocket, kept across connections and runs."""
        self._last_disconnect_reason: errors.DisconnectReason | None = None
        self._settings = LinkSettings(agent_id, api_key, ws_url, reject_conflict)
        self._refs = RefCounter()
        self._ledgers: dict[str, Ledger] = {}
        """Per room, for the agent's lifetime: the adapter never runs twice for a message in
        one process, even if the room is left and joined again, or the agent run again."""
        self._changes = Changes()
        self._stops = RemoteStopLog()
        self._threads = Threads(self.policy.adapter_threads)
        self._control = ControlLane(memory=self.policy.control_dedup_memory, changes=self._changes)
        self._run: _Run | None = None
        self._last_result = StopResult(graceful=True)
        self._rooms: Rooms | None = None
        self._link: Link | None = None
        self._connects = 0

    @classmethod
    def from_env(cls, adapter: Adapter, **overrides: Any) -> Agent:
        """Settings from `BAND_AGENT_ID`, `BAND_API_KEY`, `BAND_REST_URL`, `BAND_WS_URL`."""
        settings: dict[str, Any] = {
            "agent_id": os.environ.get("BAND_AGENT_ID", ""),
            "api_key": os.environ.get("BAND_API_KEY", ""),
            "rest_url": os.environ.get("BAND_REST_URL", ""),
            "ws_url": os.environ.get("BAND_WS_URL", ""),
        }
        settings.update({k: v for k, v in overrides.items() if v is not None})
        return cls(adapter, **settings)

    # -- observation -----------------------------------------------------------

    @property
    def rooms(self) -> Mapping[str, RoomView]:
        """The rooms the agent is in now, by id (a snapshot of live views)."""
        if self._rooms is None:
            return {}
        return {room_id: RoomView(room) for room_id, room in self._rooms.current.items()}

    @property
    def last_disconnect_reason(self) -> errors.DisconnectReason | None:
        """Why the platform last ended the session for good; kept after `run()` raised,
        and cleared by the next fresh connect."""
        if self._link is not None:
            return self._link.disconnect_reason
        return self._last_disconnect_reason

    @property
    def connected(self) -> bool:
        socket = self._link.socket if self._link is not None else None
        return socket is not None and not socket.closed.is_set()

    @property
    def connects(self) -> int:
        """How many times the agent connected and finished joining, over all its runs."""
        return self._connects + (self._link.connects if self._link is not None else 0)

    @property
    def signals(self) -> SignalCounts:
        """How many control signals were applied, and how many ignored as copies."""
        return self._control.counts

    @property
    def remote_stops(self) -> RemoteStopStats:
        """How the remote stops of the adapter's turns ended (`Turn.remote`), over all
        runs, with the most recent ones."""
        return self._stops.stats

    @property
    def threads(self) -> ThreadStats:
        """The adapter's worker threads (`run_in_thread`): how many run now, and how
        many were abandoned by an aborted turn (and still run), over all runs."""
        return self._threads.stats

    @property
    def running(self) -> bool:
        """Whether `run()` is in progress."""
        return self._run is not None

    def _sample(self) -> observe.Sample:
        rooms = self._rooms.current.values() if self._rooms is not None else ()
        return observe.Sample(
            "turn",
            in_progress=sum(1 for room in rooms if room.turn is not None),
            queued=sum(room.queued for room in rooms),
            connected=int(self.connected),
            rooms=len(rooms),
            rooms_joined=sum(1 for room in rooms if room.joined_now),
        )

    async def wait_until(self, predicate: Callable[[], bool]) -> None:
        """Return once `predicate()` holds, re-checked after every change of the agent's
        state: a turn starting or ending, a room joined, left, stopped or played, a
        signal applied, the socket connecting or closing. The caller sets the deadline."""
        while not predicate():
            await self._changes.wait()

    # -- the run ---------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Connect and serve until `stop()`; `task_status.started()` once rooms are joined.

        Raises `AgentDisconnectedError` if the platform ends the session for good,
        and `AuthenticationError` (or another `PlatformError`) if the start-up
        check of the key fails. If `stop()` comes before the agent has finished
        starting, `run()` returns without serving, and `nursery.start(agent.run)`
        returns too. An agent can be run again once `run()` has returned.
        """
        if self._run is not None:
            raise RuntimeError("Agent.run() is already running")
        run = self._run = _Run()
        started = _Started(task_status)
        tracked = observe.track(self._sample)  # the gauges of /metrics, while it runs
        try:
            async with self.adapter.lifespan():  # around everything the adapter is called for
                end = await self._serve(run, started)
        finally:
            observe.untrack(tracked)
            run.publish(StopResult(graceful=False))  # if nothing better was published
            assert run.result is not None
            self._last_result = run.result
            self._run = None
            if self._link is not None:
                self._connects += self._link.connects
                self._last_disconnect_reason = self._link.disconnect_reason
            self._link = None
            self._rooms = None
            self._changes.notify()
        if end.error is not None:
            raise end.error
        if end.terminal is not None:
            raise errors.AgentDisconnectedError(end.terminal)
        if not started.done:
            task_status.started()  # stopped during start-up: let `nursery.start` return

    async def _serve(self, run: _Run, started: _Started) -> LinkEnd:
        journal = Journal()
        async with RestClient(self.rest_url, self._settings.api_key, policy=self.policy) as rest:
            context = RoomContext(
                agent_id=self.agent_id,
                rest=rest,
                adapter=self.adapter,
                policy=self.policy,
                busy=self.while_busy,
                changes=self._changes,
                journal=journal,
                stops=self._stops,
                threads=self._threads,
                cutoff=Cutoff(),
            )
            rooms = self._rooms = Rooms(context, self._ledgers)
            if run.hard_reason is not None:  # a hard stop before the rooms existed
                rooms.hard_stop(run.hard_reason)
            link = self._link = Link(
                self._settings,
                rest=rest,
                adapter=self.adapter,
                rooms=rooms,
                control=self._control,
                policy=self.policy,
                stats=self.stats,
                refs=self._refs,
                changes=self._changes,
                disconnect_reason=self._last_disconnect_reason,
            )
            try:
                async with trio.open_nursery() as root:
                    await root.start(rooms.run)
                    root.start_soon(_stop_when_asked, run, rooms, link)
                    end = await link.run(started)
                    if rooms.settled.is_set():  # the link ended because the stop asked it to
                        run.publish(self._result(journal))
                    else:  # ended for good, or at start-up: what still runs is cancelled now
                        journal.cancelled.extend(rooms.running())
                        rooms.end_all(AbortKind.SHUTDOWN, "the session ended for good")
                    root.cancel_scope.cancel(reason="agent stopped")
            finally:  # a task that ignored its turn's cancel is cancelled again, and waited for
                await self._close_asyncio(journal, context.cutoff)
            run.publish(self._result(journal))
        return end

    async def _close_asyncio(self, journal: Journal, cutoff: Cutoff) -> None:
        """Close the turns' asyncio loop (if they used one): a task that ignored its
        turn's cancel gets one more, and the backend stop grace, before the agent ends
        (the stop result lists it: `_result`)."""
        grace = min(self.policy.backend_stop_grace, cutoff.at - trio.current_time())
        await self._threads.aclose(max(0.0, grace))

    def _result(self, journal: Journal) -> StopResult:
        unsettled = tuple(
            UnsettledMark(room_id, message_id, "processed" if failure is None else "failed")
            for room_id, ledger in self._ledgers.items()
            for message_id, failure in ledger.pending_marks()
        )
        for task in self._threads.asyncio.take_overruns():  # ignored a turn's cancel
            what = f"asyncio task {task.label} ignored its cancel"
            journal.overran.append(Overrun(task.room_id, task.message_id, what))
        cancelled = tuple(journal.cancelled)
        overran = tuple(journal.overran)
        return StopResult(
            graceful=not cancelled and not overran,
            cancelled=cancelled,
            overran=overran,
            unsettled=unsettled,
        )

    async def stop(self) -> StopResult:
        """Stop gracefully: each room finishes the unit of work in hand (its mark
        included) within the shutdown grace, then what still runs is cancelled.

        Safe to call in any phase and from any task; a second concurrent call shares
        the first's result, and cancelling a caller does not undo the stop. Called
        when the agent is not running, it returns at once: the result of the last
        run (graceful for an agent never run).
        """
        run = self._run
        if run is None:
            return self._last_result
        run.stop_requested.set()
        await run.published.wait()
        assert run.result is not None
        return run.result

    def hard_stop(self, reason: str = "stopped at once") -> None:
        """Stop now, without the shutdown grace (what a second Ctrl-C asks for).

        Every running turn is aborted (its message left `processing`, as by a
        shutdown) and every shielded wait of the rooms — a remote start still in
        flight, a remote stop, a mark, a leave — ends within
        `Policy.hard_stop_grace`; `run()` returns once the link has closed. Only
        asks: an adapter that ignores the cancel keeps `run()` waiting (the CLI exits
        without it after `Policy.hard_stop_deadline`). A no-op when not running."""
        run = self._run
        if run is None:
            return
        if run.hard_reason is None:
            run.hard_reason = reason
        if self._rooms is not None:
            self._rooms.hard_stop(reason)
        run.stop_requested.set()


async def _stop_when_asked(run: _Run, rooms: Rooms, link: Link) -> None:
    """The shutdown, in order: rooms settle (bounded by their graces), then the link
    closes its connection with a close frame and connects no more."""
    await run.stop_requested.wait()
    rooms.close()
    await rooms.settled.wait()
    link.close()


class _Started:
    """Passes `run()`'s `task_status` down to the link, remembering if it fired."""

    def __init__(self, task_status: trio.TaskStatus[None]) -> None:
        self._task_status = task_status
        self.done = False

    def started(self, value: None = None) -> None:
        self.done = True
        self._task_status.started()
