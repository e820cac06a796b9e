"""One agent under test with N rooms: start it, load it, check it, end it.

A tier is one runtime's agent identity, a participant of N fresh rooms with
the benchmark's user: the first room is the *target* (every signal trial runs
there), the others are the *busy* rooms the load keeps working. Starting a
tier is the start-up scenario (launched → connected → every room joined →
every room synced, the last two from the socket's opening too, and the
process's CPU time and memory by then); ending it is the teardown scenario
(SIGTERM → exit, with the rooms idle or busy). Between the two, the leak check asks the agent for
its live task count once idle after start-up and once idle again after the
load, and records the difference.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass, field
from functools import partial

import trio

from ._bench import Bench, poll, since, timed
from ._proc import cpu_s, rss_kib
from ._protocol import BUSY, TASKS
from ._subject import Identity, Runtime, Subject, spawn

__all__ = ["Tier", "cpu_when_connected", "create_identity", "load", "open_tier", "record_start_up"]

QUIET = 3.0
"""How long a task count above the baseline may take to come back down before the
difference is reported as leaked."""

CPU_PER_ROOM = "CPU connected → synced, per room"
"""The process's user + system time from its socket's opening until synced, over its
rooms (`_proc.cpu_s`)."""
CPU_TO_CONNECT = "CPU launched → connected (interpreter, imports)"
"""What it used before its socket opened, in seconds."""
RSS_PER_ROOM = "RSS per idle room (KiB)"
"""The process's resident memory once synced, over its rooms (`_proc.rss_kib`)."""

TEARDOWN_TAIL = 1.0
"""In the busy teardown every busy turn still has this long to run after SIGTERM."""


@dataclass(eq=False)
class Tier:
    bench: Bench
    subject: Subject
    baseline_tasks: int | None = None
    posted: list[str] = field(default_factory=list)
    """Busy messages posted (to check they all settle)."""

    @property
    def identity(self) -> Identity:
        return self.subject.identity

    @property
    def runtime(self) -> Runtime:
        return self.subject.runtime

    @property
    def target(self) -> str:
        return self.identity.rooms[0]

    @property
    def busy(self) -> tuple[str, ...]:
        return self.identity.rooms[1:]

    @property
    def rooms(self) -> int:
        return len(self.identity.rooms)

    async def live_tasks(self) -> int | None:
        """The agent's own count of live tasks, asked through a turn in the target room."""
        message = self.bench.post(self.target, TASKS)
        found = await timed(
            self.bench.options.deadline, lambda: self.subject.wait("tasks", message)
        )
        return None if found is None else self.subject.values.get(message)


def create_identity(bench: Bench, runtime: Runtime, rooms: int, label: str) -> Identity:
    """A fresh agent identity in `rooms` fresh rooms shared with the benchmark's user."""
    platform = bench.platform
    # the platform's own handle: one per participant, and `--rooms 10,10` makes two tiers
    # of one label
    agent = platform.create_agent(name=f"{runtime} {label}")
    assert agent.id is not None and agent.api_key is not None
    room_ids = []
    for i in range(rooms):
        room = platform.create_room(f"{label} {i}", [agent.id, bench.user_id])
        assert room.id is not None
        room_ids.append(room.id)
    return Identity(runtime, agent.id, agent.api_key, tuple(room_ids))


async def cpu_when_connected(bench: Bench, agent: str, pid: int, got: list[float]) -> None:
    """Append the process's CPU time (s) to `got` the moment the driver sees its socket open."""
    await bench.watch.wait(("connected", agent))
    cpu = cpu_s(pid)
    if cpu is not None:
        got.append(cpu)


async def open_tier(bench: Bench, nursery: trio.Nursery, identity: Identity, scenario: str) -> Tier:
    """Launch the agent and record its start-up; the tier is ready once every room synced."""
    platform, watch = bench.platform, bench.watch
    n = len(identity.rooms)
    runtime = identity.runtime
    subject = await spawn(nursery, identity, platform.info.rest_url, platform.info.ws_url)
    launched = subject.launched
    agent = identity.agent_id

    def joined() -> bool:
        watch.pump()
        return len(watch.joined.get(agent, ())) >= n or subject.process.returncode is not None

    def synced() -> bool:
        watch.pump()
        return len(watch.synced.get(agent, ())) >= n or subject.process.returncode is not None

    connected: float | None = None
    cpu_connected: float | None = None
    pid = subject.process.pid
    with trio.move_on_after(bench.options.startup_deadline):  # one deadline for all three
        connected = await watch.wait(("connected", agent))
        cpu_connected = cpu_s(pid)
        await poll(joined)
        await poll(synced)
    record_start_up(bench, runtime, scenario, identity, launched, connected, pid, cpu_connected)
    tier = Tier(bench, subject)
    if len(watch.synced.get(agent, ())) >= n:
        tier.baseline_tasks = await tier.live_tasks()
    return tier


def record_start_up(
    bench: Bench,
    runtime: Runtime,
    scenario: str,
    identity: Identity,
    launched: float,
    connected: float | None,
    pid: int,
    cpu_connected: float | None,
) -> None:
    """The start-up rows of one agent process, from the platform's stamps (the same for
    every runtime and the bare client: connected = the socket's opening, a room joined
    = the reply to its second join, synced = its first `/next` arrived), and what the
    process cost by then: its CPU time per room from the socket's opening (`cpu_connected`:
    what it had used then, read as the driver saw the opening; the interpreter's start
    and imports are their own row) and its resident memory per idle room."""
    watch, n, agent = bench.watch, len(identity.rooms), identity.agent_id
    cpu, rss = cpu_s(pid), rss_kib(pid)  # idle once synced: read before anything else
    got_joined = watch.joined.get(agent, {})
    got_synced = watch.synced.get(agent, {})
    all_joined = max(got_joined.values()) if len(got_joined) >= n else None
    all_synced = max(got_synced.values()) if len(got_synced) >= n else None
    joined_note = f"{len(got_joined)} of {n} rooms joined"
    synced_note = f"{len(got_synced)} of {n} rooms synced"
    metric = bench.metric
    metric(runtime, scenario, n, "launched → connected").add(since(connected, launched))
    for start, name in ((launched, "launched"), (connected, "connected")):
        metric(runtime, scenario, n, f"{name} → all rooms joined").add(
            since(all_joined, start), joined_note
        )
        metric(runtime, scenario, n, f"{name} → all rooms synced").add(
            since(all_synced, start), synced_note
        )
    if all_synced is None:
        return
    if cpu is not None and cpu_connected is not None:
        metric(runtime, scenario, n, CPU_PER_ROOM).add((cpu - cpu_connected) / n)
        metric(runtime, scenario, n, CPU_TO_CONNECT).add(cpu_connected)
    if rss is not None:
        metric(runtime, scenario, n, RSS_PER_ROOM, unit="KiB").add(rss / n)


async def load(tiers: list[Tier], rate: float, *, task_status: trio.TaskStatus[None]) -> None:
    """Keep every tier's busy rooms working until cancelled.

    First one message to every busy room, then `rate` a second per tier,
    round robin, each turn ending before its room's next message arrives
    (turns last 50-90 % of the period a room waits between two messages)."""
    rng = random.Random(7)
    cycles = []
    for tier in tiers:
        period = max(1.0, len(tier.busy) / rate)
        for room in tier.busy:
            tier.posted.append(tier.bench.post(room, f"{BUSY} {_until(rng, period)}"))
        cycles.append((tier, period))
    # One deadline for the whole burst: a runtime that cannot take every room's turn
    # in time is measured as it is, loaded past what it keeps up with (and said so).
    with trio.move_on_after(max(t.bench.options.load_deadline for t in tiers)):
        for tier in tiers:
            for message in tier.posted:
                await tier.subject.wait("enter", message)
    for tier in tiers:
        behind = sum(not tier.subject.count("enter", m) for m in tier.posted)
        if behind:
            tier.bench.notes.append(
                f"{tier.runtime}, {tier.rooms} rooms: {behind} of {len(tier.posted)} busy turns "
                "had not started when the trials began"
            )
    task_status.started()
    turn = 0
    while True:
        await trio.sleep(1 / rate)
        for tier, period in cycles:
            if tier.busy:
                room = tier.busy[turn % len(tier.busy)]
                tier.posted.append(tier.bench.post(room, f"{BUSY} {_until(rng, period)}"))
        tier.bench.watch.pump()  # keep the index ahead of the ring
        turn += 1


def _until(rng: random.Random, period: float) -> float:
    return time.perf_counter() + period * rng.uniform(0.5, 0.9)


async def settle(tier: Tier, scenarios: tuple[str, ...]) -> None:
    """Abort every busy turn (agent-wide interrupt), wait for every message to settle,
    then record the live tasks against the start-up baseline."""
    bench = tier.bench
    bench.platform.send_control(tier.identity.agent_id, "interrupt", reason="bench: settle")
    open_ = set(tier.posted)

    def settled() -> bool:
        bench.watch.pump()
        for message in list(open_):
            marks = ("processed", message), ("failed", message)
            if any(bench.watch.indexed(mark) for mark in marks):
                open_.discard(message)
        return not open_

    with trio.move_on_after(bench.options.load_deadline):
        await bench.platform.wait_until(settled)
    tier.posted.clear()
    after = await tier.live_tasks()
    with trio.move_on_after(QUIET):  # tasks that end on their own (a last mark) are no leak
        while after is not None and tier.baseline_tasks is not None and after > tier.baseline_tasks:
            await trio.sleep(0.1)
            after = await tier.live_tasks()
    ok = not open_ and after is not None and tier.baseline_tasks is not None
    for scenario in scenarios:
        leaked = max(0, after - tier.baseline_tasks) if ok else None  # type: ignore[operator]
        bench.leaked[(tier.runtime, scenario, tier.rooms)] = leaked
    if open_:
        agent = tier.identity.agent_id
        states = Counter(bench.platform.delivery(m)[agent]["status"] for m in open_)
        bench.metric(tier.runtime, scenarios[0], tier.rooms, "busy messages settled").add(
            None, f"{len(open_)} busy messages never settled ({dict(states)})"
        )


async def teardown(tier: Tier, scenario: str, *, busy: bool) -> None:
    """SIGTERM → exit; with `busy`, every busy room has a turn with `TEARDOWN_TAIL` to go."""
    bench = tier.bench
    n = tier.rooms
    busy = busy and bool(tier.busy)
    name = "SIGTERM → exit, rooms busy" if busy else "SIGTERM → exit, rooms idle"
    floor = f"tail:{TEARDOWN_TAIL}" if busy else None
    series = bench.metric(tier.runtime, scenario, n, name, floor)
    if busy:
        lead = 3.0 + 0.01 * len(tier.busy)  # time for every busy room to start its turn
        end = time.perf_counter() + lead + TEARDOWN_TAIL
        messages = [bench.post(room, f"{BUSY} {end}") for room in tier.busy]
        for started, message in enumerate(messages):
            if await timed(lead, partial(tier.subject.wait, "enter", message)) is None:
                status = bench.platform.delivery(message)[tier.identity.agent_id]["status"]
                series.add(None, f"{started} of {len(messages)} busy turns started ({status})")
                await tier.subject.terminate(bench.options.exit_deadline)
                return
        await trio.sleep_until(trio.current_time() + (end - TEARDOWN_TAIL - time.perf_counter()))
    took = await tier.subject.terminate(bench.options.exit_deadline)
    series.add(took, f"still running {bench.options.exit_deadline:.0f} s after SIGTERM: killed")
