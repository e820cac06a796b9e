"""Shared fixtures: an embedded platform on loopback and a live-task baseline (the seeded
tests' rotation is the `seed_rotation` plugin beside this file)."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator

import pytest
import trio
from hypothesis import HealthCheck, settings

from band_trio.platform import Platform, open_platform

pytest_plugins = ["pytester", "seed_rotation"]


def hypothesis_settings(config: pytest.Config) -> None:
    """The profile every property test starts from, and the run's seed.

    Property tests assert behaviour, not speed: hypothesis's default deadline (200 ms an
    example) and its too-slow health check fail a test on a CI machine at a load of 10,
    as a "Flaky" or "DeadlineExceeded" the code under test did not cause. A test without
    its own count runs the run's share of hypothesis's 100 (`examples`, all of them with
    `--all-seeds`). Loaded here, after the options and before any test module, so a
    test's own `@settings(...)` starts from it.

    The seed is the seed day's, unless `--hypothesis-seed` names one: each day's run
    draws other examples (the run's share of them adds up over the days), every worker
    the same as the controller, and a failure reruns the same day, or any day with
    `--hypothesis-seed=DAY` (the header gives it). Set before hypothesis's own plugin
    reads the option (this conftest's hooks run before an installed plugin's)."""
    from seed_rotation import SEED_DAY_KEY, examples  # a plugin: imported as one first

    settings.register_profile(
        "band-trio",
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
        max_examples=examples(settings.get_profile("default").max_examples),
    )
    settings.load_profile("band-trio")
    if config.option.hypothesis_seed is None:
        config.option.hypothesis_seed = str(config.stash[SEED_DAY_KEY])


def pytest_report_header(config: pytest.Config) -> str:
    return f"hypothesis seed {config.option.hypothesis_seed} (--hypothesis-seed=N for another)"


def pytest_configure(config: pytest.Config) -> None:
    """Give SIGINT back its default handler when the run was started with it ignored.

    A shell without job control starts a background command (`pytest ... &`, as some CI
    steps and `nohup` wrappers do) with SIGINT ignored, and an ignored signal stays
    ignored across exec: every child a test starts would inherit it, and the tests that
    send a real Ctrl-C to a child (tests/cli/test_base_exceptions.py, the conformance
    command's in tests/kit/test_bounded_probes.py) would wait out their deadline. A
    handled signal is reset to its default on exec, so the children get the SIGINT a
    terminal gives; under pytest-xdist each worker runs this too."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    hypothesis_settings(config)
    config.addinivalue_line(
        "markers",
        "long(seconds): a test that takes about `seconds` on its own; under pytest-xdist"
        " it is put at the head of a worker's share so it starts first",
    )


@pytest.hookimpl(trylast=True)  # after -k/-m deselection: the shares of what runs
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Start the long tests first, spread over the workers (`@pytest.mark.long(seconds)`).

    `--dist worksteal` first hands worker k the k-th of `workercount` contiguous shares
    of the collection, and an idle worker then steals from the *end* of another's queue:
    a test in the middle of a share runs on its own worker, after what comes before it.
    The long ones (real peers, CLI runs, pages run as written) sat in the first share,
    one after another, so that worker ran well past the others: the run's tail. Here
    each long test goes to the head of a share, the longest first onto the share that
    has the least (longest processing time first); the other tests keep their order.
    Every worker computes the same order from the same collection, as xdist requires.
    Without workers (`-n 0`) the order is the collection's."""
    workers = int(getattr(config, "workerinput", {}).get("workercount", 0))
    if workers < 2:
        return
    longs = [(item, float(m.args[0])) for item in items if (m := item.get_closest_marker("long"))]
    if not longs:
        return
    rest = [item for item in items if item.get_closest_marker("long") is None]
    sizes, left = [], len(items)
    for k in range(workers):  # the shares worksteal cuts: len(pending) // nodes remaining
        sizes.append(left // (workers - k))
        left -= sizes[-1]
    heads: list[list[pytest.Item]] = [[] for _ in range(workers)]
    loads = [0.0] * workers
    for item, seconds in sorted(longs, key=lambda pair: -pair[1]):
        k = min(range(workers), key=lambda k: (loads[k], k))
        heads[k].append(item)
        loads[k] += seconds
    ordered: list[pytest.Item] = []
    for k in range(workers):
        ordered += heads[k]
        take = max(0, sizes[k] - len(heads[k]))
        ordered += rest[:take]
        del rest[:take]
    items[:] = ordered + rest


@pytest.fixture
async def platform() -> AsyncIterator[Platform]:
    """A seeded embedded platform on 127.0.0.1 (one agent, one user, one room)."""
    async with open_platform(seed=True) as running:
        yield running


def live_tasks() -> int:
    return trio.lowlevel.current_statistics().tasks_living
