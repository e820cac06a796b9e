"""Deliberately broken adapters, one per conformance probe, and correct ones to compare.

Each broken adapter breaks the one rule its probe checks and otherwise behaves
like `DemoAdapter` (`sleep=N` in the text keeps it at work N seconds, then it
echoes), so the other probes mostly pass on it; where it also fails another
probe, its docstring says which.

Some rules cannot be broken by an adapter at all: the runtime holds them
whatever the adapter does (the message a stop left is `processing` and
replayed on play; the next turn and `on_room_left` come only after the
aborted turn ended; the next turn is told the last abort). For those the tests
break the runtime instead, and the adapters here are the closest real breaks
— ones that escape the runtime's ownership (a system task, a stale outbox) —
which the probes, as written, cannot see.

Remote work runs on `Remote`, an in-process stand-in for a remote service: a
job runs on its own clock (no task of its own), is stopped by its id, and
records when it started, finished and was stopped, so a test can tell what
really happened on the "remote" side.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from subprocess import DEVNULL
from typing import Any

import trio

from band_trio.contract import (
    Adapter,
    StopAnswer,
    StopOutcome,
    Turn,
    close_tool_calls,
    run_asyncio,
)

_SLEEP = re.compile(r"sleep=(\d+(?:\.\d+)?)")


def work_time(content: str) -> float:
    """How long the text asks the adapter to work (`sleep=N`; 0 without it)."""
    match = _SLEEP.search(content)
    return float(match.group(1)) if match else 0.0


def echo(turn: Turn) -> str:
    return f"echo: {turn.message.content}"


def is_leave(cancel: trio.Cancelled) -> bool:
    """Whether the runtime cancelled the turn because the agent left the room."""
    return (cancel.reason or "").startswith("left")


# -- the remote stand-in ----------------------------------------------------------------


class RemoteStopped(Exception):
    """The job was stopped before it produced its answer."""


@dataclass(slots=True)
class Job:
    id: str
    prompt: str
    started_at: float
    """`time.perf_counter()` when it was started."""
    ends_at: float
    """trio clock: when it finishes on its own, unless stopped first."""
    stopped: trio.Event = field(default_factory=trio.Event)
    stops: int = 0
    """How many stop requests it received."""
    stopped_at: float | None = None
    """`time.perf_counter()` when the (first) stop took effect."""
    answered_at: float | None = None

    @property
    def running(self) -> bool:
        """Neither stopped nor at its end (by the trio clock)."""
        return not self.stopped.is_set() and trio.current_time() < self.ends_at


class Remote:
    """An in-process stand-in for a remote service that runs jobs by id.

    `start_takes` is how long the start call takes to answer with the job's id (the
    job exists from the call's first moment: a start cut off orphans it);
    `stop_takes` is how long a stop request takes to take effect (the "network" and
    the remote side winding down): the stop's caller waits that long."""

    def __init__(self, *, start_takes: float = 0.0, stop_takes: float = 0.0) -> None:
        self.start_takes = start_takes
        self.stop_takes = stop_takes
        self.jobs: dict[str, Job] = {}
        self._ids = itertools.count(1)
        self._changed = trio.Event()

    async def start(self, prompt: str) -> str:
        """Start a job for `prompt` (it works `sleep=N` seconds); its id."""
        job_id = f"job-{next(self._ids)}"
        ends_at = trio.current_time() + self.start_takes + work_time(prompt)
        self.jobs[job_id] = Job(job_id, prompt, time.perf_counter(), ends_at)
        self._notify()
        await trio.sleep(self.start_takes)  # the answer on its way back
        return job_id

    async def result(self, job_id: str) -> str:
        """Wait for the job's answer; `RemoteStopped` if it was stopped first."""
        job = self.jobs[job_id]
        with trio.move_on_at(job.ends_at):
            await job.stopped.wait()
        if job.stopped.is_set():
            raise RemoteStopped(job_id)
        job.answered_at = time.perf_counter()
        self._notify()
        return f"echo: {job.prompt}"

    async def stop(self, job_id: str) -> StopAnswer:
        """Stop the job; takes `stop_takes` seconds to take effect."""
        job = self.jobs[job_id]
        job.stops += 1
        await trio.sleep(self.stop_takes)
        if not job.stopped.is_set():
            job.stopped_at = time.perf_counter()
            job.stopped.set()
        self._notify()
        return StopOutcome.CONFIRMED

    def running(self) -> list[Job]:
        return [job for job in self.jobs.values() if job.running]

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        """Return once `predicate()` holds (the caller sets the deadline)."""
        while not predicate():
            await self._changed.wait()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()


# -- correct adapters -------------------------------------------------------------------


class CorrectRemoteAdapter(Adapter):
    """Runs each message as a job on `remote`, registered with the turn: correct."""

    def __init__(self, remote: Remote) -> None:
        self.remote = remote

    async def on_turn(self, turn: Turn) -> None:
        async with turn.remote(stop=self.stop, name="stand-in job") as work:
            with work.starting():
                work.started(await self.remote.start(turn.message.content))
            assert work.handle is not None
            answer = await self.remote.result(work.handle)
            work.finished()
        await turn.reply(answer)

    async def stop(self, job_id: str) -> StopAnswer:
        return await self.remote.stop(job_id)


class SlowCleanup(Adapter):
    """After a cancel, spends `cleanup` seconds in a shielded cleanup, then lets the
    cancel through.

    Breaks *interrupt mid-work* with a cleanup past the grace (`cleanup_grace`, 1 s);
    with a cleanup inside the grace it is correct, just slow to stop, which the tests
    that break the runtime use to make an overlap visible."""

    def __init__(self, cleanup: float) -> None:
        self.cleanup = cleanup

    async def on_turn(self, turn: Turn) -> None:
        try:
            await trio.sleep(work_time(turn.message.content))
        except trio.Cancelled:
            with trio.CancelScope(shield=True):
                await trio.sleep(self.cleanup)  # "saving state" on the way out
            raise
        await turn.reply(echo(turn))


# -- interrupt mid-work -----------------------------------------------------------------


class PostsAfterCancel(Adapter):
    """Catches the cancel, posts what it has so far in a shielded block, then lets the
    cancel through: a reply after the interrupt.

    Breaks *interrupt mid-work* ("posted after the interrupt"). After a stop or a leave
    the platform refuses the post (the room is stopped, or the agent is no longer in
    it), which the adapter ignores, so the other probes pass."""

    def __init__(self) -> None:
        self.refused: list[str] = []

    async def on_turn(self, turn: Turn) -> None:
        try:
            await trio.sleep(work_time(turn.message.content))
        except trio.Cancelled:
            with trio.CancelScope(shield=True):
                try:
                    await turn.reply("(partial) here is what I had so far")
                except Exception as exc:  # refused: a stop, a leave
                    self.refused.append(f"{type(exc).__name__}: {exc}")
            raise
        await turn.reply(echo(turn))


# -- stop mid-work, then play -----------------------------------------------------------


class StaleOutbox(Adapter):
    """Keeps what an aborted turn had in an outbox and delivers it (shielded: "never
    lose a reply") at the start of the adapter's next turn: after stop and play, the
    stopped turn's answer is posted anyway.

    The closest real break of *stop mid-work, then play* ("a stop sends nothing
    more"): the rules the probe checks — the message left `processing`, entered again
    after play — are the runtime's and hold whatever an adapter does, and the probe,
    as written, passes this adapter (see the tests). It also posts after an interrupt,
    but in the next turn, which the interrupt probe never starts."""

    def __init__(self) -> None:
        self.outbox: list[str] = []
        self.delivered: list[str] = []

    async def on_turn(self, turn: Turn) -> None:
        with trio.CancelScope(shield=True):
            while self.outbox:
                stale = self.outbox.pop(0)
                await turn.reply(stale)
                self.delivered.append(stale)
        try:
            await trio.sleep(work_time(turn.message.content))
        except trio.Cancelled:
            self.outbox.append(f"(late) the answer to {turn.message.content!r}")
            raise
        await turn.reply(echo(turn))


# -- remote stop sent once per abort ----------------------------------------------------


class ShortRemoteBlock(CorrectRemoteAdapter):
    """Registers its job but leaves the `turn.remote` block right after the start and
    reads the answer outside it: leaving the block normally tells the turn the work is
    over, so an interrupt stops nothing and the job runs on.

    Breaks *remote stop sent once per abort* ("1 remote work(s) started, 0 stop(s)
    sent"). The job is left running on the remote: nothing else notices."""

    async def on_turn(self, turn: Turn) -> None:
        async with turn.remote(stop=self.stop, name="stand-in job") as work:
            with work.starting():
                work.started(await self.remote.start(turn.message.content))
        assert work.handle is not None
        await turn.reply(await self.remote.result(work.handle))


class NeverStarted(CorrectRemoteAdapter):
    """Registers its job but never calls `work.started(handle)`: the turn cannot stop
    what it does not know, so an abort sends no stop and the job runs on.

    Breaks *remote stop sent once per abort* ("the remote work registered by the turn
    never started"), after the subject's deadline. It also fails every probe that waits
    for the long prompt to be at work (they all wait for the registered work to start)
    and *stop before the remote handle exists* ("no stop was sent"); only *a stop
    after the remote work finished* (nothing is stopped) and the tool probe pass."""

    async def on_turn(self, turn: Turn) -> None:
        async with turn.remote(stop=self.stop, name="stand-in job"):
            job = await self.remote.start(turn.message.content)
            answer = await self.remote.result(job)
        await turn.reply(answer)


# -- stop before the remote handle exists ----------------------------------------------


class UnshieldedStart(CorrectRemoteAdapter):
    """Starts its job without `work.starting()`: an abort that lands while the start call
    is in flight cuts it off, the handle never arrives, and the job runs on, orphaned.

    Breaks *stop before the remote handle exists* ("no stop was sent"); the other
    probes pass (they abort only once the job has started)."""

    async def on_turn(self, turn: Turn) -> None:
        async with turn.remote(stop=self.stop, name="stand-in job") as work:
            work.started(await self.remote.start(turn.message.content))
            assert work.handle is not None
            answer = await self.remote.result(work.handle)
            work.finished()
        await turn.reply(answer)


# -- a stop after the remote work finished sends nothing --------------------------------


class RemoteLeftOpen(CorrectRemoteAdapter):
    """Never calls `work.finished()` and replies inside the `turn.remote` block: while
    the reply is on its way the job, long over, still counts as running, and an abort
    then stops it again.

    Breaks *a stop after the remote work finished sends nothing* ("the remote work
    was still open when the adapter replied"). Passes the other probes: an abort of a
    long prompt stops the job once, as it should."""

    async def on_turn(self, turn: Turn) -> None:
        async with turn.remote(stop=self.stop, name="stand-in job") as work:
            with work.starting():
                work.started(await self.remote.start(turn.message.content))
            assert work.handle is not None
            await turn.reply(await self.remote.result(work.handle))


# -- history valid after an abort mid tool-calls -----------------------------------------


class ToolCaller(Adapter):
    """A tool-calling adapter without a model: a message with "tool" in it makes it call
    one tool, `lookup`, which works `sleep=N` seconds. It keeps an OpenAI-style
    transcript per room (`transcript(room_id)`) and, at the start of a turn after an
    abort, closes the tool calls the abort left without a result: correct."""

    def __init__(self) -> None:
        self.transcripts: dict[str, list[dict[str, Any]]] = {}

    def transcript(self, room_id: str) -> list[dict[str, Any]]:
        return self.transcripts.get(room_id, [])

    async def on_turn(self, turn: Turn) -> None:
        messages = self.transcripts.setdefault(turn.room_id, [])
        self.after_abort(messages, turn)
        content = turn.message.content
        messages.append({"role": "user", "content": content})
        if "tool" in content:
            call = {
                "id": f"call-{turn.message.id}",
                "type": "function",
                "function": {"name": "lookup", "arguments": "{}"},
            }
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
            await turn.send_event("lookup({})", message_type="tool_call")
            await trio.sleep(work_time(content))  # the tool at work
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": "sunny"})
        else:
            await trio.sleep(work_time(content))
        answer = echo(turn)
        messages.append({"role": "assistant", "content": answer})
        await turn.reply(answer)

    def after_abort(self, messages: list[dict[str, Any]], turn: Turn) -> None:
        abort = turn.last_abort
        if abort is not None:
            messages[:] = close_tool_calls(messages, abort.kind, abort.reason)


class DanglingToolCall(ToolCaller):
    """Never closes the tool calls an abort left open: the next request would carry a
    tool call without a result (OpenAI answers 400).

    Breaks *history valid after an abort mid tool-calls* ("0 results"); the other
    probes pass."""

    def after_abort(self, messages: list[dict[str, Any]], turn: Turn) -> None:
        pass


def transcript_of(adapter: Adapter, room_id: str) -> list[dict[str, Any]]:
    """`Subject.transcript` for `ToolCaller` and its kin."""
    assert isinstance(adapter, ToolCaller)
    return adapter.transcript(room_id)


# -- the next turn / leaving the room waits for the stop --------------------------------


class DetachedStop(CorrectRemoteAdapter):
    """Hands the stop to a system task and returns at once ("requested"): the turn ends,
    and the room's next turn starts (or `on_room_left` runs) while the job is still
    being stopped, `remote.stop_takes` seconds more.

    The real break of *the next turn waits for the previous stop* and *leaving the
    room waits for the stop*, which those probes, as written, cannot see: they compare
    when the adapter's turn ended with when the next turn (or `on_room_left`) began,
    and the turn did end first — the stop it left behind runs in a task nobody owns.
    It escapes *nothing left after the agent stops* too (a system task is no
    descendant of the agent's task)."""

    def __init__(self, remote: Remote) -> None:
        super().__init__(remote)
        self.left_at: list[float] = []

    async def stop(self, job_id: str) -> StopAnswer:
        trio.lowlevel.spawn_system_task(self._stop_later, job_id)
        return StopOutcome.REQUESTED

    async def _stop_later(self, job_id: str) -> None:
        await self.remote.stop(job_id)

    async def on_room_left(self, room_id: str) -> None:
        self.left_at.append(time.perf_counter())


class SwallowsLeave(Adapter):
    """Takes a leave for "the room is gone, just finish": it swallows the cancel when
    the agent leaves the room (and only then) and returns normally.

    Breaks *leaving the room waits for the stop* ("the turn returned instead of letting
    the cancel through"). Interrupt and stop it lets through, so the other probes pass."""

    async def on_turn(self, turn: Turn) -> None:
        try:
            await trio.sleep(work_time(turn.message.content))
        except trio.Cancelled as cancel:
            if is_leave(cancel):
                return
            raise
        await turn.reply(echo(turn))


# -- a swallowed cancellation is reported -----------------------------------------------


class SwallowsCancel(Adapter):
    """Catches the cancel and returns normally, as if the turn were done.

    Breaks *a swallowed cancellation is reported* ("the adapter swallowed the
    cancellation: its turn returned"). The same swallow also fails *interrupt
    mid-work* and *leaving the room waits for the stop* (both check that the cancel
    goes through); the rest pass (the runtime still treats the turn as aborted)."""

    async def on_turn(self, turn: Turn) -> None:
        try:
            await trio.sleep(work_time(turn.message.content))
        except trio.Cancelled:
            return
        await turn.reply(echo(turn))


class KeepsWorking(Adapter):
    """Ignores the cancel for `overrun` seconds (its work shielded), then lets it through.

    Breaks *a swallowed cancellation is reported* ("the adapter ignored the stop and is
    still at work") when `overrun` is past the probe's patience (twice the cleanup grace
    plus the backend stop grace), and *interrupt mid-work* (past the cleanup grace)."""

    def __init__(self, overrun: float) -> None:
        self.overrun = overrun

    async def on_turn(self, turn: Turn) -> None:
        try:
            await trio.sleep(work_time(turn.message.content))
        except trio.Cancelled:
            with trio.CancelScope(shield=True):
                await trio.sleep(self.overrun)  # "just one more step"
            raise
        await turn.reply(echo(turn))


class AsyncioSwallowsCancel(Adapter):
    """asyncio code (`run_asyncio`) that catches its `CancelledError` and works on, as
    if the cancel were a hiccup (`sleep=N` keeps it at work N seconds, then it
    echoes); it gives in to the second cancel, at the agent's exit.

    Breaks *a swallowed cancellation is reported* and *interrupt mid-work* ("the
    asyncio code did not stop"): the trio side of its turn lets the cancel through
    after the stop grace, but the asyncio task runs on."""

    async def on_turn(self, turn: Turn) -> None:
        await turn.reply(await run_asyncio(self._work, turn.message.content))

    @staticmethod
    async def _work(content: str) -> str:
        try:
            await asyncio.sleep(work_time(content))
        except asyncio.CancelledError:
            await asyncio.sleep(work_time(content))  # "just finish the step"
        return f"echo: {content}"


class AsyncioShieldsWork(Adapter):
    """asyncio code that shields its model call from the cancel (`asyncio.shield`): the
    task ends at once, the call runs on.

    Breaks *a swallowed cancellation is reported* and *interrupt mid-work* ("the
    asyncio code did not stop: a task the asyncio task started still runs")."""

    async def on_turn(self, turn: Turn) -> None:
        await turn.reply(await run_asyncio(self._work, turn.message.content))

    @staticmethod
    async def _work(content: str) -> str:
        await asyncio.shield(asyncio.sleep(work_time(content)))
        return f"echo: {content}"


class AsyncioAdapter(Adapter):
    """A correct asyncio adapter: its work lets the cancel through."""

    async def on_turn(self, turn: Turn) -> None:
        await turn.reply(await run_asyncio(self._work, turn.message.content))

    @staticmethod
    async def _work(content: str) -> str:
        await asyncio.sleep(work_time(content))
        return f"echo: {content}"


RELEASE = threading.Event()
"""Set by a test when it is done with a stuck adapter, so its abandoned run can end."""


class ShieldedForever(Adapter):
    """Ignores the cancel for good: a shielded wait nobody can end (until the test sets
    `RELEASE`). Its agent cannot be stopped, so every probe that aborts a turn would
    hang the kit: the kit must fail those probes within their deadline instead."""

    def __init__(self, release: threading.Event = RELEASE) -> None:
        self.release = release

    async def on_turn(self, turn: Turn) -> None:
        with trio.CancelScope(shield=True):
            while not self.release.is_set():
                await trio.sleep(0.05)


class BlockingThread(Adapter):
    """The realistic way to be stuck: a blocking call in `trio.to_thread.run_sync`
    without `abandon_on_cancel` (the cancel waits for the thread, which waits for
    `RELEASE`)."""

    def __init__(self, release: threading.Event = RELEASE) -> None:
        self.release = release

    async def on_turn(self, turn: Turn) -> None:
        await trio.to_thread.run_sync(self.release.wait)


# -- nothing left after the agent stops -------------------------------------------------


class LeavesSocket(Adapter):
    """Opens a TCP connection (to a listener of its own on 127.0.0.1) in every turn and
    never closes it.

    Breaks *nothing left after the agent stops* ("socket left open"); the other probes
    pass. `close()` closes them all (the test's own cleanup)."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.sockets: list[socket.socket] = []

    async def on_turn(self, turn: Turn) -> None:
        address = self.listener.getsockname()[:2]
        self.sockets.append(socket.create_connection(address))  # and forgets it
        await trio.sleep(work_time(turn.message.content))
        await turn.reply(echo(turn))

    def close(self) -> None:
        for sock in self.sockets:
            sock.close()
        self.listener.close()


class LeavesChild(Adapter):
    """Starts a helper process (`sleep 30`) in every turn and never waits for it.

    Breaks *nothing left after the agent stops* ("child process left running"); the
    other probes pass. `close()` kills and reaps them (the test's own cleanup)."""

    def __init__(self) -> None:
        self.children: list[subprocess.Popen[bytes]] = []

    async def on_turn(self, turn: Turn) -> None:
        child = subprocess.Popen(  # noqa: ASYNC220 - the bug: started, never waited for
            ["sleep", "30"], stdin=DEVNULL, stdout=DEVNULL, stderr=DEVNULL
        )
        self.children.append(child)
        await trio.sleep(work_time(turn.message.content))
        await turn.reply(echo(turn))

    def close(self) -> None:
        for child in self.children:
            with suppress(ProcessLookupError):
                child.kill()
            child.wait()


class LeavesSystemTask(Adapter):
    """Starts a trio system task in every turn that runs on after the agent stopped.

    A break of *nothing left after the agent stops*: no owner waits for a system task.
    `release()` ends them (the test's own cleanup)."""

    def __init__(self) -> None:
        self.running = 0
        self._release = trio.Event()

    async def on_turn(self, turn: Turn) -> None:
        trio.lowlevel.spawn_system_task(self._linger)
        await trio.sleep(work_time(turn.message.content))
        await turn.reply(echo(turn))

    async def _linger(self) -> None:
        self.running += 1
        try:
            await self._release.wait()
        finally:
            self.running -= 1

    def release(self) -> None:
        self._release.set()


# -- questions and guidance -------------------------------------------------------------

ASK = re.compile(r"ask\b", re.IGNORECASE)


class ShieldsAsk(Adapter):
    """Asks the room (for a text starting `ask`) inside a shielded scope, "so that an
    answer is never lost": an interrupt or a stop cannot end the wait, which lasts
    until the answer, or `answer_within` (then it takes "deny" and lets the cancel
    through at its next await). Otherwise the demo adapter.

    Breaks *an interrupt ends the wait for an answer* and *a stop ends the wait for an
    answer* ("did not end ... a shielded scope?")."""

    def __init__(self, answer_within: float) -> None:
        self.answer_within = answer_within

    async def on_turn(self, turn: Turn) -> None:
        await trio.sleep(work_time(turn.message.content))
        head = "echo"
        if ASK.match(turn.message.content):
            with trio.CancelScope(shield=True):
                head = await turn.ask("May I?", answer_within=self.answer_within)
        await turn.reply(f"{head}: {turn.message.content}")


class SwallowsAskCancel(Adapter):
    """Takes an interrupted question for a "deny" and returns, as if the turn were done.

    Breaks *an interrupt ends the wait for an answer* and *a stop ends the wait for an
    answer* ("the turn returned instead of letting the ... cancel through")."""

    async def on_turn(self, turn: Turn) -> None:
        if ASK.match(turn.message.content):
            try:
                await turn.ask("May I?")
            except trio.Cancelled:
                return  # "denied": nothing to do
        await turn.reply(echo(turn))


class DropsGuidance(Adapter):
    """Works (`sleep=N`), replies, then takes the guidance offered meanwhile "to clear
    the queue": each message it takes is claimed and settled with the turn, and nothing
    ever comes of it.

    Breaks *guidance is never lost* ("took 2 message(s) after its last post")."""

    async def on_turn(self, turn: Turn) -> None:
        await trio.sleep(work_time(turn.message.content))
        await turn.reply(echo(turn))
        turn.take_guidance()
