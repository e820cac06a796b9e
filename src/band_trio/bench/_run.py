"""The run: the platform, the floors, then each tier's scenarios, both runtimes alternating.

Everything runs under one trio run in the driver's process, with the
embedded platform in it; each agent under test and the floor client are
processes of their own. Both runtimes' tiers are up at once, each with its
own identity and rooms, and every trial alternates between them (A, B, B, A,
...) so that drift in the machine's load hits both alike.

Per tier (N rooms): start-up, then for each scenario the load is started,
the trials run, the load stops, every busy turn is aborted and settled, and
the agent's live task count is compared with the one after its start-up
(`leaked_tasks`); finally SIGTERM with every busy room mid-turn. Idle tiers
only start up and get SIGTERM.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import trio

from ..platform import open_platform
from ..policy import PlatformPolicy
from ._bench import Bench, Options
from ._floors import COMPOSED, measure_floors
from ._peer import Peer, open_peer, peer_missing
from ._progress import Progress
from ._remote import command_trial
from ._remote_peers import a2a_trial, acp_trial, anthropic_trial, copilot_trial, llm_trial
from ._results import Row
from ._signals import ask_trial, interrupt_trial, stop_play_trial
from ._subject import Runtime
from ._tier import TEARDOWN_TAIL, Tier, create_identity, load, open_tier, settle, teardown

__all__ = ["Report", "run_bench"]

Trial = Callable[[Tier], Awaitable[None]]
PeerTrial = Callable[[Tier, Peer], Awaitable[None]]

GIVE_UP = 3
"""Trials in a row that fail (each after its deadline) before a runtime's remaining
trials of a scenario are given up: an overloaded runtime cannot stretch the run for
ever, and the note and the failures say so."""


async def _room_interrupt(tier: Tier) -> None:
    await interrupt_trial(tier, agent_wide=False)


async def _agent_interrupt(tier: Tier) -> None:
    await interrupt_trial(tier, agent_wide=True)


SCENARIOS: tuple[tuple[str, tuple[str, ...], Trial, bool], ...] = (
    ("interrupt", ("interrupt",), _room_interrupt, True),
    ("agent interrupt", ("agent interrupt",), _agent_interrupt, True),
    ("stop, play", ("stop", "play"), stop_play_trial, True),
    ("interrupt: approval wait", ("interrupt: approval wait",), ask_trial, True),
    ("remote stop: command", ("remote stop: command",), command_trial, False),
)
"""(name, the scenarios its series are filed under, one trial, whether at every tier size);
the remote-stop scenario runs at the smallest tier only."""


@dataclass(frozen=True)
class Report:
    options: Options
    rows: tuple[Row, ...]
    floors_ms: dict[str, float]
    log_entries_lost: int
    seconds: float
    skipped: tuple[str, ...] = ()
    """Scenarios not run here, and why (a peer's package missing)."""
    notes: tuple[str, ...] = ()


def _chosen(options: Options) -> tuple[tuple[str, tuple[str, ...], Trial, bool], ...]:
    """The signal scenarios `options` asks for (`Options.scenarios`), in their order."""
    wanted = options.scenarios
    return tuple(s for s in SCENARIOS if wanted is None or s[0] in wanted)


def _steps(options: Options, runtimes: int) -> int:
    chosen = _chosen(options)
    everywhere = sum(1 for *_, at_every_size in chosen if at_every_size)
    per_tier = everywhere * options.trials * runtimes + 2 * runtimes
    peers = sum(runtimes if only is None else 1 for *_, only in PEER_SCENARIOS)
    remote_stops = runtimes * any(not at_every_size for *_, at_every_size in chosen)
    remote = options.remote_trials * (remote_stops + peers) if options.remote_trials else 0
    idle = 2 * runtimes * len(options.idle_rooms)
    return 1 + per_tier * len(options.rooms) + remote + idle


async def run_bench(options: Options, *, show_progress: bool = True) -> Report:
    """Run every scenario `options` asks for and summarise it."""
    runtimes: list[Runtime] = ["band-trio", "band-sdk"] if options.peer else ["band-trio"]
    progress = Progress(_steps(options, len(runtimes)), enabled=show_progress)
    started = trio.current_time()
    policy = PlatformPolicy(log_entries=500_000)
    async with open_platform(seed=True, policy=policy) as platform:
        from ._watch import LogWatch

        user = platform.info.user_id
        assert user is not None
        bench = Bench(platform, LogWatch(platform), user, options, progress)
        progress.note("floors")
        floor = create_identity(bench, "floor", 1, "floor")
        floor_series = await measure_floors(
            platform, bench.watch, floor, floor.rooms[0], options.floor_samples, options.settle
        )
        progress.step("floors measured")
        smallest = min(options.rooms) if options.rooms else None
        for index, n in enumerate(options.rooms):
            order = runtimes if index % 2 == 0 else runtimes[::-1]
            await _signal_tier(bench, order, n, remote=n == smallest and options.remote_trials > 0)
        for index, n in enumerate(options.idle_rooms):
            order = runtimes if index % 2 == 0 else runtimes[::-1]
            await _idle_tier(bench, order, n)
        lost = bench.watch.lost
    progress.close()
    floors = {s.metric: Row.of(s, {}, None).p50_ms for s in floor_series}
    composed = {name: sum(floors[part] for part in parts) for name, parts in COMPOSED.items()}
    composed[f"tail:{TEARDOWN_TAIL}"] = TEARDOWN_TAIL * 1000
    rows = [Row.of(s, {}, None) for s in floor_series]
    for series in bench.series.values():
        leaked = bench.leaked.get((series.runtime, series.scenario, series.rooms))
        rows.append(Row.of(series, composed, leaked))
    return Report(
        options=options,
        rows=tuple(rows),
        floors_ms={**floors, **composed},
        log_entries_lost=lost,
        seconds=trio.current_time() - started,
        skipped=tuple(bench.skipped),
        notes=tuple(bench.notes),
    )


async def _signal_tier(bench: Bench, runtimes: list[Runtime], n: int, *, remote: bool) -> None:
    options, progress = bench.options, bench.progress
    async with trio.open_nursery() as nursery:
        tiers = []
        for runtime in runtimes:
            progress.note(f"{runtime}: starting with {n} rooms")
            identity = create_identity(bench, runtime, n, f"{runtime}-{n}")
            tiers.append(await open_tier(bench, nursery, identity, "start-up"))
            progress.step(f"{runtime} started ({n} rooms)")
        given_up: set[Tier] = set()
        try:
            for name, filed, trial, everywhere in _chosen(options):
                if not everywhere and not remote:
                    continue
                trials = options.trials if everywhere else options.remote_trials
                active = [t for t in tiers if t not in given_up]
                async with trio.open_nursery() as load_nursery:
                    if any(t.busy for t in active):
                        progress.note(f"{name}, {n} rooms: starting the load")
                        await load_nursery.start(load, active, options.load_rate)
                    failing = {t: GIVE_UP if t in given_up else 0 for t in tiers}
                    for i in range(trials):
                        for tier in tiers if i % 2 == 0 else tiers[::-1]:
                            if failing[tier] >= GIVE_UP:
                                progress.step(f"{name}, {n} rooms, {tier.runtime} given up")
                                continue
                            before = bench.failures(tier.runtime)
                            await trial(tier)
                            failing[tier] = (
                                failing[tier] + 1 if bench.failures(tier.runtime) > before else 0
                            )
                            if failing[tier] == GIVE_UP:
                                given_up.add(tier)
                                bench.notes.append(
                                    f"{tier.runtime}, {name}, {n} rooms: {GIVE_UP} trials in a row "
                                    f"failed; its other trials at {n} rooms were not run"
                                )
                            progress.step(f"{name}, {n} rooms, {tier.runtime}")
                    load_nursery.cancel_scope.cancel()
                for tier in active:
                    progress.note(f"{name}, {n} rooms: settling {tier.runtime}")
                    await settle(tier, filed)
            if remote:
                await _peer_scenarios(bench, tiers)
        finally:
            for tier in tiers:
                progress.note(f"{tier.runtime}: SIGTERM with {n} busy rooms")
                await teardown(tier, "teardown", busy=True)
                progress.step(f"{tier.runtime} stopped")


PEER_SCENARIOS: tuple[tuple[str, str, str, PeerTrial, Runtime | None], ...] = (
    ("stubllm", "stubllm_server.py", "remote stop: stubllm", llm_trial, None),
    ("a2a", "a2a_server.py", "remote stop: a2a", a2a_trial, None),
    ("copilot", "stubllm_server.py", "remote stop: copilot", copilot_trial, "band-trio"),
    ("acp", "stubllm_server.py", "remote stop: acp", acp_trial, "band-trio"),
    ("anthropic", "stubllm_server.py", "remote stop: anthropic", anthropic_trial, "band-trio"),
)
"""(peer, its server script, scenario, one trial, the only runtime it applies to)."""


async def _peer_scenarios(bench: Bench, tiers: list[Tier]) -> None:
    """The remote-stop scenarios against real peers, each peer a process of its own."""
    options, progress = bench.options, bench.progress
    for peer_name, script, scenario, trial, only in PEER_SCENARIOS:
        runs = [tier for tier in tiers if only is None or tier.runtime == only]
        why = peer_missing(peer_name)
        if why is not None:
            bench.skipped.append(f"{scenario}: {why}")
            progress.step(f"{scenario} not run", options.remote_trials * len(runs))
            continue
        progress.note(f"{scenario}: starting the peer")
        async with open_peer(peer_name, script) as peer:
            for i in range(options.remote_trials):
                for tier in runs if i % 2 == 0 else runs[::-1]:
                    await trial(tier, peer)
                    progress.step(f"{scenario}, {tier.runtime}")
        for tier in runs:
            await settle(tier, (scenario,))


async def _idle_tier(bench: Bench, runtimes: list[Runtime], n: int) -> None:
    progress = bench.progress
    for runtime in runtimes:
        async with trio.open_nursery() as nursery:
            progress.note(f"{runtime}: starting with {n} idle rooms")
            identity = create_identity(bench, runtime, n, f"{runtime}-idle-{n}")
            tier = await open_tier(bench, nursery, identity, "start-up")
            progress.step(f"{runtime} started ({n} idle rooms)")
            await teardown(tier, "teardown", busy=False)
            progress.step(f"{runtime} stopped ({n} idle rooms)")
