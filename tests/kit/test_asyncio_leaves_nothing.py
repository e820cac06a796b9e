"""An asyncio adapter that lets every cancel through leaves nothing behind once its agent
stopped: the kit's *nothing left after the agent stops* passes it.

`AsyncioLoop` spawns a system task of the trio run (`band-trio asyncio: close at the
run's end`) for an owner that never closes its loop. It slept until the run's end even
after the owner's `aclose`, and the kit's snapshot of the run's system tasks found it
once the agent stopped ("system task outlived the agent"): every asyncio adapter failed
that probe (`broken.AsyncioAdapter` here; the LangGraph and Agents SDK adapters in
test_reference_adapters_conform.py). Red before 62c1abf (the task ends at the close).
"""

from __future__ import annotations

import trio
import trio.testing
from broken import AsyncioAdapter

from band_trio.contract import Message, Threads, Turn, TurnControl, run_asyncio, turn_context
from band_trio.testing import Subject
from band_trio.testing._probes import nothing_left
from support import NoPlatform

DEADLINE = 20


def system_tasks() -> set[trio.lowlevel.Task]:
    root = trio.lowlevel.current_root_task()
    assert root is not None
    return {task for nursery in root.child_nurseries for task in nursery.child_tasks}


async def test_an_asyncio_adapter_leaves_nothing_after_its_agent_stops() -> None:
    with trio.fail_after(DEADLINE):
        result = await nothing_left(Subject(AsyncioAdapter, long_prompt="sleep=30"))
    assert result.outcome == "passed", result


async def test_closing_an_owners_asyncio_loop_leaves_no_system_task() -> None:
    threads = Threads(4)
    message = Message(id="m1", room_id="r1", content="x", sender_id="u1", sender_type="User")
    turn = Turn(
        message, NoPlatform(), control=TurnControl("r1", "m1", stop_grace=1.0, threads=threads)
    )
    before = system_tasks()

    async def work() -> int:
        return 1

    with trio.fail_after(DEADLINE), turn_context(turn):
        assert await run_asyncio(work) == 1
    assert await threads.aclose(1.0) == 0
    await trio.testing.wait_all_tasks_blocked()  # the closer ends at its next step
    assert {task.name for task in system_tasks() - before} == set()
