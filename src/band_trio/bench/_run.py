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

With `Options.scale_floor` (`--scale`) the scale floor's bare client
(`_bare`, `_scale_floor`) takes its turn beside the runtimes at every size:
its start-up, the mass abort's floor between their trials (`_mass`), and its
teardown (marks at once, then the close). The platform keeps `band-trio
platform`'s defaults: only its request log is longer, for the watch.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import NamedTuple

import trio

from ..platform import open_platform
from ..policy import PlatformPolicy, Policy
from ._bare import Bare, close_bare, open_bare
from ._bench import Bench, Options
from ._floors import COMPOSED, measure_floors
from ._mass import MASS, floor_wave, mass_trial
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
Run = tuple[Runtime, Callable[[], Awaitable[None]]]
"""Who runs a trial, and the trial."""

GIVE_UP = 3
"""Trials in a row that fail (each after its deadline) before a runtime's remaining
trials of a scenario are given up: an overloaded runtime cannot stretch the run for
ever, and the note and the failures say so."""


async def _room_interrupt(tier: Tier) -> None:
    await interrupt_trial(tier, agent_wide=False)


async def _agent_interrupt(tier: Tier) -> None:
    await interrupt_trial(tier, agent_wide=True)


class Scenario(NamedTuple):
    name: str
    filed: tuple[str, ...]
    """The scenarios its series are filed under."""
    trial: Trial
    everywhere: bool
    """Whether it runs at every tier size (else at the smallest only)."""
    loaded: bool = True
    """Whether its trials run under the load (`_tier.load`)."""


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("interrupt", ("interrupt",), _room_interrupt, True),
    Scenario("agent interrupt", ("agent interrupt",), _agent_interrupt, True),
    Scenario(MASS, (MASS,), mass_trial, True, loaded=False),
    Scenario("stop, play", ("stop", "play"), stop_play_trial, True),
    Scenario("interrupt: approval wait", ("interrupt: approval wait",), ask_trial, True),
    Scenario("remote stop: command", ("remote stop: command",), command_trial, False),
)
"""The signal scenarios; the remote-stop one runs at the smallest tier only, the mass
abort (`_mass`) with no load, `Options.mass_trials` times, its floor alternating."""


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
    join_window: int = field(default_factory=lambda: Policy().join_window)
    """The agents' join window (`Policy.join_window`: band-trio's default, unchanged)."""


def _chosen(options: Options) -> tuple[Scenario, ...]:
    """The signal scenarios `options` asks for (`Options.scenarios`), in their order; the
    mass abort only when named (`--scale`): the other presets keep their length."""
    wanted = options.scenarios
    if wanted is None:
        return tuple(s for s in SCENARIOS if s.name != MASS)
    return tuple(s for s in SCENARIOS if s.name in wanted)


def _steps(options: Options, runtimes: int) -> int:
    chosen = _chosen(options)
    players = runtimes + options.scale_floor  # the bare client: a step like a runtime's
    everywhere = sum(1 for s in chosen if s.everywhere and s.name != MASS)
    mass = options.mass_trials * players if any(s.name == MASS for s in chosen) else 0
    per_tier = everywhere * options.trials * runtimes + mass + 2 * players
    peers = sum(runtimes if only is None else 1 for *_, only in PEER_SCENARIOS)
    remote_stops = runtimes * any(not s.everywhere for s in chosen)
    remote = options.remote_trials * (remote_stops + peers) if options.remote_trials else 0
    idle = 2 * players * len(options.idle_rooms)
    return 1 + per_tier * len(options.rooms) + remote + idle


async def run_bench(options: Options, *, show_progress: bool = True) -> Report:
    """Run every scenario `options` asks for and summarise it."""
    runtimes: list[Runtime] = ["band-trio", "band-sdk"] if options.peer else ["band-trio"]
    progress = Progress(_steps(options, len(runtimes)), enabled=show_progress)
    players = [*runtimes, "floor"] if options.scale_floor else runtimes
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
            order = players if index % 2 == 0 else players[::-1]
            await _signal_tier(bench, order, n, remote=n == smallest and options.remote_trials > 0)
        for index, n in enumerate(options.idle_rooms):
            order = players if index % 2 == 0 else players[::-1]
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


async def _signal_tier(bench: Bench, players: list[Runtime], n: int, *, remote: bool) -> None:
    """Every chosen scenario at `n` rooms, `players` (the runtimes, and the bare client
    with `scale_floor`) started, their trials and stopped in that order, alternating."""
    options, progress = bench.options, bench.progress
    async with trio.open_nursery() as nursery:
        tiers: dict[Runtime, Tier] = {}
        bare: Bare | None = None
        for runtime in players:
            progress.note(f"{runtime}: starting with {n} rooms")
            identity = create_identity(bench, runtime, n, f"{runtime}-{n}")
            if runtime == "floor":
                bare = await open_bare(bench, nursery, identity)
            else:
                tiers[runtime] = await open_tier(bench, nursery, identity, "start-up")
            progress.step(f"{runtime} started ({n} rooms)")
        given_up: set[Runtime] = set()
        try:
            for spec in _chosen(options):
                if not spec.everywhere and not remote:
                    continue
                runs: list[Run] = [(t.runtime, partial(spec.trial, t)) for t in tiers.values()]
                if spec.name == MASS and bare is not None:
                    runs.append(("floor", partial(floor_wave, bare)))
                    runs.sort(key=lambda run: players.index(run[0]))
                await _trials(bench, spec, n, runs, given_up, tiers)
            if remote:
                await _peer_scenarios(bench, list(tiers.values()))
        finally:
            for runtime in players:
                progress.note(f"{runtime}: SIGTERM with {n} busy rooms")
                if runtime in tiers:
                    await teardown(tiers[runtime], "teardown", busy=True)
                elif bare is not None:
                    await close_bare(bare, busy=True)
                progress.step(f"{runtime} stopped")


async def _trials(
    bench: Bench,
    spec: Scenario,
    n: int,
    runs: list[Run],
    given_up: set[Runtime],
    tiers: dict[Runtime, Tier],
) -> None:
    """One scenario's trials at `n` rooms, the runs alternating (A, B, B, A, ...),
    under the load if it has one; then every runtime's tier settled."""
    options, progress, name = bench.options, bench.progress, spec.name
    if spec.name == MASS:
        trials = options.mass_trials
    else:
        trials = options.trials if spec.everywhere else options.remote_trials
    active = [t for r, t in tiers.items() if r not in given_up]
    async with trio.open_nursery() as load_nursery:
        if spec.loaded and any(t.busy for t in active):
            progress.note(f"{name}, {n} rooms: starting the load")
            await load_nursery.start(load, active, options.load_rate)
        failing = {runtime: GIVE_UP if runtime in given_up else 0 for runtime, _ in runs}
        for i in range(trials):
            for runtime, trial in runs if i % 2 == 0 else runs[::-1]:
                if failing[runtime] >= GIVE_UP:
                    progress.step(f"{name}, {n} rooms, {runtime} given up")
                    continue
                before = bench.failures(runtime)
                await trial()
                failing[runtime] = failing[runtime] + 1 if bench.failures(runtime) > before else 0
                if failing[runtime] == GIVE_UP:
                    given_up.add(runtime)
                    bench.notes.append(
                        f"{runtime}, {name}, {n} rooms: {GIVE_UP} trials in a row "
                        f"failed; its other trials at {n} rooms were not run"
                    )
                progress.step(f"{name}, {n} rooms, {runtime}")
        load_nursery.cancel_scope.cancel()
    for tier in active:
        progress.note(f"{name}, {n} rooms: settling {tier.runtime}")
        await settle(tier, spec.filed)


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


async def _idle_tier(bench: Bench, players: list[Runtime], n: int) -> None:
    progress = bench.progress
    for runtime in players:
        async with trio.open_nursery() as nursery:
            progress.note(f"{runtime}: starting with {n} idle rooms")
            identity = create_identity(bench, runtime, n, f"{runtime}-idle-{n}")
            if runtime == "floor":
                bare = await open_bare(bench, nursery, identity)
                progress.step(f"{runtime} started ({n} idle rooms)")
                await close_bare(bare, busy=False)
            else:
                tier = await open_tier(bench, nursery, identity, "start-up")
                progress.step(f"{runtime} started ({n} idle rooms)")
                await teardown(tier, "teardown", busy=False)
            progress.step(f"{runtime} stopped ({n} idle rooms)")
