"""The conformance kit's harness: one adapter, the embedded platform, a scripted room.

    async with open_kit(subject) as kit:            # platform + agent, one trio run
        message = kit.post(subject.long_prompt)
        record = await kit.at_work(message)           # the adapter is busy with it
        sent = kit.signal("interrupt", reason="...")  # over the real websocket
        await kit.until(lambda: kit.status(message) == "processed")

Everything runs over real loopback sockets: the platform is the embedded one,
the agent is band-trio's, the adapter is the author's (wrapped in `Observed`,
which only watches). Each probe opens a kit of its own, so no probe sees
another's room.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import trio

from ..contract import Adapter
from ..platform import Platform, open_platform
from ..policy import Policy, WhileBusy
from ..runtime import Agent, StopResult
from ._leaks import Leaks
from ._observed import Observed, TurnRecord
from ._progress import progress
from ._tasks import TaskTracker

__all__ = ["KIT_POLICY", "Kit", "ProbeResult", "Subject", "open_kit"]

KIT_POLICY = Policy(cleanup_grace=1.0, backend_stop_grace=5.0, shutdown_grace=2.0)
"""The policy the probes run the agent with (the defaults, but a short shutdown)."""

Mode = Literal["interrupt", "stop", "play"]


@dataclass(frozen=True, slots=True)
class Subject:
    """The adapter under test, and how to make it work."""

    factory: Callable[[], Adapter]
    """Builds a fresh adapter (each probe gets its own)."""
    long_prompt: str = "sleep=30"
    """A message that keeps the adapter at work until it is aborted (several seconds at
    least): the probes interrupt, stop and leave in the middle of it."""
    quick_prompt: str = "hello"
    """A message the adapter answers quickly."""
    tool_prompt: str | None = None
    """For a tool-calling adapter: a message that makes the model call tools (the
    adapter must post a `tool_call` event when it runs one)."""
    transcript: Callable[[Adapter, str], Sequence[Mapping[str, Any]]] | None = None
    """For a tool-calling adapter: the conversation it keeps for a room, as OpenAI's or
    Anthropic's messages (`transcript(adapter, room_id)`), checked after an abort mid
    tool-calls."""
    ask_prompt: str | None = None
    """For an adapter that asks the room before acting (`Turn.ask`): a message that makes
    it ask, then wait for the answer. Without one the question probes do not apply."""
    steer_prompt: str = "sleep=1"
    """A message the adapter works on for a second or so, then answers by itself: the
    guidance probe offers the room's messages to that turn (`WhileBusy.STEER`)."""
    policy: Policy = KIT_POLICY
    settle: float = 0.3
    """How long a turn that registers no remote work is left to work before a probe
    aborts it (one with remote work is aborted once its handle is known)."""
    deadline: float = 20.0
    """No single probe waits longer than this for anything (and, once its script is
    over, the kit gets this long to stop the agent)."""
    probe_deadline: float = 120.0
    """No probe takes longer than this in all: past it, it fails (its adapter never
    lets the cancel in) and its run is left behind (docs/reference/conformance.md)."""
    isolated: bool = True
    """Each probe in a trio run of its own, bounded as above. False runs the probes in
    the caller's run, still under `probe_deadline`, which then bounds only an adapter
    that lets the cancel in: for adapters that share something of the caller's run (a
    process it started and serves), which no other run may touch."""


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """What one probe found."""

    name: str
    outcome: Literal["passed", "failed", "not applicable"]
    observed: str
    """What was seen: why it failed, or why it does not apply, or the evidence."""
    latency: float | None = None
    """The probe's measured interval in seconds (e.g. signal → the adapter cancelled)."""

    @property
    def passed(self) -> bool:
        """True unless it failed: a probe that does not apply is not a failure."""
        return self.outcome != "failed"


class ProbeFailed(Exception):
    """Raised inside a probe to fail it with what was observed."""


@dataclass
class Kit:
    """A running platform and agent around one observed adapter."""

    subject: Subject
    platform: Platform
    agent: Agent
    adapter: Observed
    room_id: str
    user_id: str
    agent_id: str
    stop_result: StopResult | None = None
    notes: list[str] = field(default_factory=list)

    # -- the room's script ----------------------------------------------------

    def post(self, content: str) -> str:
        """A user posts `content` to the room; returns the message id."""
        return self.platform.post_message(self.room_id, self.user_id, content)

    def signal(self, mode: Mode, *, reason: str | None = None) -> float:
        """Send interrupt, stop or play for the room; returns when (`perf_counter`)."""
        sent = time.perf_counter()
        self.platform.send_control(self.agent_id, mode, room_id=self.room_id, reason=reason)
        return sent

    def leave(self) -> float:
        """Remove the agent from the room; returns when."""
        left = time.perf_counter()
        self.platform.remove_participant(self.room_id, self.agent_id)
        return left

    # -- what happened --------------------------------------------------------

    def status(self, message_id: str) -> str | None:
        entry = self.platform.delivery(message_id).get(self.agent_id)
        return None if entry is None else str(entry["status"])

    def posts_since(self, since: float) -> list[str]:
        """Paths of the agent's accepted posts (messages, events) after `since`."""
        return [
            entry.path or ""
            for entry in self.platform.log()
            if entry.kind == "rest"
            and entry.t > since
            and entry.method == "POST"
            and (entry.status or 0) < 300
            and (entry.path or "").endswith(("/messages", "/events"))
        ]

    def said(self) -> list[str]:
        """The contents of the agent's messages in the room, oldest first."""
        return [
            m.content for m in self.platform.messages(self.room_id) if m.sender_id == self.agent_id
        ]

    def event_bodies(self) -> list[str]:
        """The bodies of the agent's accepted event posts (`POST .../events`), as logged."""
        return [
            entry.body or ""
            for entry in self.platform.log()
            if entry.kind == "rest"
            and entry.method == "POST"
            and (entry.status or 0) < 300
            and (entry.path or "").endswith("/events")
        ]

    async def until(self, predicate: Callable[[], bool], what: str) -> None:
        """Wait (within the subject's deadline) for `predicate`, re-checked whenever the
        platform, the agent or the adapter changes; fail the probe with `what`."""
        if (state := progress()) is not None:
            state.note(what)
        with trio.move_on_after(self.subject.deadline) as waited:
            waits = (self.platform.wait_until, self.agent.wait_until, self.adapter.wait_for)
            async with trio.open_nursery() as nursery:
                for wait in waits:
                    nursery.start_soon(_first, wait, predicate, nursery.cancel_scope)
        if waited.cancelled_caught:
            raise ProbeFailed(f"{what} (not within {self.subject.deadline:g}s)")

    async def until_status(self, message_id: str, wanted: str, what: str) -> None:
        """`until` the message's status is `wanted`; a message marked `failed` instead
        fails the probe at once, with the adapter's error (it will never be `wanted`)."""
        await self.until(lambda: self.status(message_id) in (wanted, "failed"), what)
        if self.status(message_id) != wanted:
            records = self.adapter.of(message_id)
            error = records[-1].error if records else None
            raise ProbeFailed(f"{what}: it was marked failed ({error or 'no adapter error'})")

    async def at_work(self, message_id: str) -> TurnRecord:
        """Wait until the adapter is at work on `message_id`: its remote work started,
        or — for an adapter that registers none — `settle` seconds into the turn."""
        await self.until(lambda: bool(self.adapter.of(message_id)), "the adapter was never entered")
        record = self.adapter.of(message_id)[-1]
        with trio.move_on_after(self.subject.settle):
            while not any(w.is_started for w in record.turn.remote_works):
                await record.turn.wait_remote_change()
        if not record.running:
            raise ProbeFailed(
                f"the adapter finished the long prompt ({record.ending}) before it could be "
                "aborted: give a `long_prompt` that keeps it at work"
            )
        if record.turn.remote_works and not any(w.is_started for w in record.turn.remote_works):
            await self.until(
                lambda: any(w.is_started for w in record.turn.remote_works) or not record.running,
                "the remote work registered by the turn never started",
            )
        return record


async def _first(
    wait: Callable[[Callable[[], bool]], Awaitable[None]],
    predicate: Callable[[], bool],
    done: trio.CancelScope,
) -> None:
    """One of the waits that `Kit.until` races: whichever sees `predicate` first wins."""
    await wait(predicate)
    done.cancel()


@asynccontextmanager
async def open_kit(subject: Subject, *, while_busy: WhileBusy | None = None) -> AsyncIterator[Kit]:
    """The embedded platform and an agent running `subject`'s adapter, for one probe
    (its rooms' `while_busy` strategy as given, the agent's default otherwise).

    On exit the agent is stopped (its result kept on the kit) and checked for
    leftovers: tasks, sockets and child processes it started (`Kit.leaks`)."""
    leaks = Leaks.now()
    async with open_platform(seed=True) as platform:
        info = platform.info
        assert info.agent_id and info.api_key and info.room_id and info.user_id
        adapter = Observed(subject.factory())
        agent = Agent(
            adapter,
            agent_id=info.agent_id,
            api_key=info.api_key,
            rest_url=info.rest_url,
            ws_url=info.ws_url,
            policy=subject.policy,
            while_busy=while_busy,
        )
        kit = Kit(subject, platform, agent, adapter, info.room_id, info.user_id, info.agent_id)
        tasks = TaskTracker()
        trio.lowlevel.add_instrument(tasks)
        try:
            async with trio.open_nursery() as nursery:

                async def run(*, task_status: trio.TaskStatus[None]) -> None:
                    tasks.adopt()
                    await agent.run(task_status=task_status)

                with trio.fail_after(subject.deadline):
                    await nursery.start(run)
                try:
                    yield kit
                finally:
                    with trio.CancelScope(shield=True), trio.move_on_after(subject.deadline):
                        kit.stop_result = await agent.stop()
        finally:
            trio.lowlevel.remove_instrument(tasks)
        kit.notes.extend(leaks.left(tasks, platform_port(platform)))


def platform_port(platform: Platform) -> int:
    return int(platform.info.rest_url.rsplit(":", 1)[1].split("/")[0])
