"""What the `Turn` offers and the adapter's hooks, over real sockets.

The room's history and participants come from the platform's REST API; the
last interrupt or stop reaches the next turn with its reason (`Turn.last_abort`);
`on_started` and `on_room_left` run under `Policy.hook_deadline`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import pytest
import trio

from band_trio import AdapterError, AgentInfo, Policy, Turn
from band_trio.contract import LastAbort
from band_trio.platform import Platform
from band_trio.platform._store import Delivery
from band_trio.wire import EVENT_CONTENT_CHARS
from support import Recorder, background_agent, running_agent, seeded, status

DEADLINE = 10


class Remember:
    """Records what each turn was told of the last abort, then waits or answers."""

    def __init__(self) -> None:
        self.told: dict[str, LastAbort | None] = {}

    async def __call__(self, turn: Turn) -> None:
        self.told[turn.message.content] = turn.last_abort
        if turn.message.content.startswith("wait"):
            await trio.sleep_forever()
        await turn.reply(f"done: {turn.message.content}")


@pytest.mark.parametrize("mode", ["interrupt", "stop"])
async def test_the_reason_of_the_last_interrupt_or_stop_reaches_the_next_turn(
    platform: Platform, mode: str
) -> None:
    agent_id, room, user = seeded(platform)
    remember = Remember()
    adapter = Recorder(remember)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter) as running:
            aborted = platform.post_message(room, user, "wait: a long one")
            await adapter.wait_for(lambda: len(adapter.calls) == 1)
            platform.send_control(agent_id, mode, room_id=room, reason="too long, be brief")  # type: ignore[arg-type]
            await adapter.wait_for(lambda: len(adapter.cancelled) == 1)
            if mode == "stop":
                platform.send_control(agent_id, "play", room_id=room)
                # the stopped message is replayed first: it is told why it was stopped
                await adapter.wait_for(lambda: len(adapter.calls) == 2)
                await adapter.wait_for(lambda: len(adapter.cancelled) == 1)
                platform.send_control(agent_id, "interrupt", room_id=room)
                await platform.wait_until(lambda: status(platform, aborted) == "processed")
            after = platform.post_message(room, user, "next")
            await platform.wait_until(lambda: status(platform, after) == "processed")
            assert running.agent.rooms[room].last_abort == remember.told["next"]
    assert remember.told["wait: a long one"] is None or mode == "stop"
    if mode == "interrupt":
        assert remember.told["next"] == LastAbort("interrupt", "too long, be brief", aborted)
    else:
        assert remember.told["wait: a long one"] == LastAbort("stop", "too long, be brief", aborted)
        assert remember.told["next"] == LastAbort("interrupt", None, aborted)


async def test_a_signal_with_no_turn_running_leaves_no_last_abort(platform: Platform) -> None:
    agent_id, room, user = seeded(platform)
    remember = Remember()
    adapter = Recorder(remember)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter) as running:
            platform.send_control(agent_id, "interrupt", room_id=room, reason="nothing to stop")
            await running.agent.wait_until(lambda: running.agent.signals.applied == 1)
            message = platform.post_message(room, user, "hello")
            await platform.wait_until(lambda: status(platform, message) == "processed")
    assert remember.told == {"hello": None}


async def test_history_and_participants_come_from_the_platform(platform: Platform) -> None:
    agent_id, room, user = seeded(platform)
    seen: dict[str, object] = {}

    async def behaviour(turn: Turn) -> None:
        history = await turn.history()
        people = await turn.participants()
        assert await turn.history() == history  # fetched once per turn
        seen[turn.message.content] = ([m.content for m in history], {p.id for p in people})
        await turn.reply(f"done: {turn.message.content}")

    with trio.fail_after(DEADLINE):
        async with running_agent(platform, Recorder(behaviour)):
            first = platform.post_message(room, user, "first")
            await platform.wait_until(lambda: status(platform, first) == "processed")
            second = platform.post_message(room, user, "second")
            await platform.wait_until(lambda: status(platform, second) == "processed")
    fetched = [
        e for e in platform.log() if e.kind == "rest" and (e.path or "").endswith("/context")
    ]
    assert len(fetched) == 2  # once per turn, though each turn asked twice
    assert seen["first"] == (["first"], {agent_id, user})
    assert seen["second"] == (["first", "done: first", "second"], {agent_id, user})


async def test_history_in_a_long_room_is_its_newest_messages_this_one_last(
    platform: Platform,
) -> None:
    """`/context` is oldest first, 50 a page by default (band-client-rest 0.0.51): the
    first page of a long room is its oldest messages, without the one being answered.
    The history walks the cursor to the end and keeps the newest
    `Policy.history_messages`."""
    agent_id, room, user = seeded(platform)
    older = [platform.post_message(room, user, f"old {n}") for n in range(130)]
    for message_id in older:  # answered long ago
        seq = platform.store.message(message_id).seq  # type: ignore[union-attr]
        platform.store.set_delivery(seq, agent_id, Delivery("processed", 1, 1))
    seen: list[str] = []

    async def behaviour(turn: Turn) -> None:
        seen.extend(m.content for m in await turn.history())
        await turn.reply("done")

    policy = Policy(history_messages=60)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, Recorder(behaviour), policy=policy):
            now = platform.post_message(room, user, "now")
            await platform.wait_until(lambda: status(platform, now) == "processed")
    assert seen == [f"old {n}" for n in range(71, 130)] + ["now"]
    pages = [e for e in platform.log() if e.kind == "rest" and (e.path or "").endswith("/context")]
    assert len(pages) == 2 and all("limit=100" in (e.query or "") for e in pages)


async def test_an_event_over_the_platforms_cap_is_cut_keeping_its_head_and_tail(
    platform: Platform,
) -> None:
    """An event's content is at most 16384 characters (band-client-rest 0.0.51; the
    platform refuses a longer one 422): `Turn.send_event` cuts it, head and tail kept,
    as band-sdk does, so a long tool result does not fail the turn."""
    _, room, user = seeded(platform)
    long = "head " + "x" * 40_000 + " tail"

    async def behaviour(turn: Turn) -> None:
        await turn.send_event(long, message_type="tool_result")
        await turn.reply("done")

    with trio.fail_after(DEADLINE):
        async with running_agent(platform, Recorder(behaviour)):
            message = platform.post_message(room, user, "go")
            await platform.wait_until(lambda: status(platform, message) == "processed")
    (event,) = platform.store.events(room)
    content = event["content"]
    assert len(content) == EVENT_CONTENT_CHARS
    assert content.startswith("head xxx") and content.endswith("xxx tail")
    assert "characters cut" in content


class Hooks(Recorder):
    def __init__(self, *, fail: bool = False, slow: bool = False) -> None:
        super().__init__()
        self.infos: list[AgentInfo] = []
        self.fail = fail
        self.slow = slow

    async def on_started(self, agent: AgentInfo) -> None:
        self.infos.append(agent)
        if self.slow:
            await trio.sleep_forever()
        if self.fail:
            raise RuntimeError("no model configured")


async def test_on_started_is_called_once_per_run_with_who_the_agent_is(
    platform: Platform,
) -> None:
    agent_id, room, user = seeded(platform)
    adapter = Hooks()
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter):
            message = platform.post_message(room, user, "hi")
            await platform.wait_until(lambda: status(platform, message) == "processed")
    assert [info.id for info in adapter.infos] == [agent_id]
    assert adapter.infos[0].name and adapter.infos[0].handle


@pytest.mark.parametrize(
    ("hooks", "error"),
    [
        (Hooks(fail=True), "on_started failed: RuntimeError: no model configured"),
        (Hooks(slow=True), "on_started ran past its 0.2s deadline"),
    ],
)
async def test_a_failing_or_overrunning_on_started_ends_the_run_with_an_adapter_error(
    platform: Platform, hooks: Hooks, error: str
) -> None:
    with trio.fail_after(DEADLINE):
        async with background_agent(platform, hooks, policy=Policy(hook_deadline=0.2)) as run:
            await run.finished.wait()
    assert isinstance(run.error, AdapterError)
    assert error in str(run.error)
    assert not run.started.is_set()
    assert hooks.calls == []  # no room was served


async def test_on_room_left_is_bounded_by_the_hook_deadline(platform: Platform) -> None:
    agent_id, room, _ = seeded(platform)
    entered = trio.Event()

    class Stuck(Recorder):
        async def on_room_left(self, room_id: str) -> None:
            entered.set()
            await trio.sleep_forever()

    adapter = Stuck()
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, policy=Policy(hook_deadline=0.2)) as running:
            platform.remove_participant(room, agent_id)
            await entered.wait()
            await running.agent.wait_until(lambda: room not in running.agent.rooms)
    assert running.stop_result is not None and running.stop_result.graceful


class Owning(Recorder):
    """Owns a task for the length of `lifespan()`, and records the order of its calls."""

    def __init__(self) -> None:
        super().__init__()
        self.order: list[str] = []
        self.inside = False

    @asynccontextmanager
    async def _running(self) -> AsyncIterator[None]:
        self.order.append("enter")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.sleep_forever)  # what the adapter owns for the run
            self.inside = True
            try:
                yield
            finally:
                self.inside = False
                nursery.cancel_scope.cancel()
        self.order.append("exit")

    def lifespan(self) -> AbstractAsyncContextManager[None]:
        return self._running()

    async def on_turn(self, turn: Turn) -> None:
        self.order.append(f"turn inside={self.inside}")
        await super().on_turn(turn)

    async def on_room_left(self, room_id: str) -> None:
        self.order.append(f"left inside={self.inside}")
        await super().on_room_left(room_id)


async def test_lifespan_is_entered_once_per_run_around_every_call_of_the_adapter(
    platform: Platform,
) -> None:
    _, room, user = seeded(platform)
    adapter = Owning()
    with trio.fail_after(DEADLINE):
        for text in ("one", "two"):  # an agent can be run again: each run enters it
            async with running_agent(platform, adapter):
                message = platform.post_message(room, user, text)
                await platform.wait_until(
                    lambda m=message: status(platform, m) == "processed"  # type: ignore[misc]
                )
    one_run = ["enter", "turn inside=True", "left inside=True", "exit"]
    assert adapter.order == one_run * 2  # the task it owned was waited for (running_agent)
