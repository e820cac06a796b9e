"""The pytest plugin band-trio installs (entry point `pytest11`): fixtures for adapter authors.

    async def test_my_adapter_conforms(band_conformance):
        await band_conformance(MyAdapter, long_prompt="write a long essay")

The fixtures are trio fixtures, run by pytest-trio (`pip install "band-trio[pytest]"`).
A test that asks for one of them is marked `@pytest.mark.trio` here, so the author's
suite needs neither the marker nor `trio_mode` for it; their other async tests are
theirs to mark. Without pytest-trio such a test fails at its set-up saying what to
install, instead of pytest's "async def functions are not natively supported".

* `band_platform` — the embedded platform on loopback, seeded with one agent,
  one user and one room;
* `band_agent` — `async with band_agent(adapter) as agent:` runs an agent for
  `adapter` on `band_platform` (connected, rooms joined), stopped on exit;
* `band_conformance` — `await band_conformance(factory, long_prompt=..., ...)`
  runs every probe of the kit (or those named like `probes=[...]`), each in a
  trio run of its own under its deadlines, and fails the test with the table if
  one failed — a stuck adapter included; it returns the results.

Nothing here runs unless a test asks for these fixtures.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from inspect import iscoroutinefunction
from typing import Any

import pytest

from ..contract import Adapter
from ..platform import Platform, open_platform
from ..runtime import Agent
from ._kit import Subject
from ._probes import run_probes, select_probes
from ._report import table

__all__ = [
    "band_agent",
    "band_conformance",
    "band_platform",
    "pytest_collection_modifyitems",
    "pytest_runtest_setup",
]

Conformance = Callable[..., Awaitable[list[Any]]]
FIXTURES = frozenset({"band_platform", "band_agent", "band_conformance"})
"""The plugin's fixtures: a test asking for one of them runs under pytest-trio."""
NEEDS_PYTEST_TRIO = (
    "band-trio's fixtures ({names}) are trio fixtures and need pytest-trio, which is not"
    ' installed (or disabled with -p no:trio): pip install "band-trio[pytest]"'
)


def _uses_fixtures(item: pytest.Item) -> frozenset[str]:
    return FIXTURES.intersection(getattr(item, "fixturenames", ()))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each async test that asks for a band fixture `trio` (pytest-trio runs it)."""
    if not config.pluginmanager.hasplugin("trio"):
        return  # `pytest_runtest_setup` says what to install
    for item in items:
        if not isinstance(item, pytest.Function) or not _uses_fixtures(item):
            continue
        test = getattr(getattr(item.obj, "hypothesis", None), "inner_test", item.obj)
        if iscoroutinefunction(test) and item.get_closest_marker("trio") is None:
            item.add_marker(pytest.mark.trio)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test asking for a band fixture without pytest-trio fails here, saying why."""
    used = _uses_fixtures(item)
    if used and not item.config.pluginmanager.hasplugin("trio"):
        pytest.fail(NEEDS_PYTEST_TRIO.format(names=", ".join(sorted(used))), pytrace=False)


@pytest.fixture
async def band_platform() -> AsyncIterator[Platform]:
    """The embedded platform on 127.0.0.1, seeded (one agent, one user, one room)."""
    async with open_platform(seed=True) as platform:
        yield platform


@pytest.fixture
def band_agent(
    band_platform: Platform,
) -> Callable[..., AbstractAsyncContextManager[Agent]]:
    """`async with band_agent(adapter, policy=...) as agent:` — the seeded agent running
    `adapter` on `band_platform`, connected; stopped gracefully on exit."""

    @asynccontextmanager
    async def running(adapter: Adapter, **options: Any) -> AsyncIterator[Agent]:
        import trio

        info = band_platform.info
        assert info.agent_id and info.api_key
        agent = Agent(
            adapter,
            agent_id=info.agent_id,
            api_key=info.api_key,
            rest_url=info.rest_url,
            ws_url=info.ws_url,
            **options,
        )
        async with trio.open_nursery() as nursery:
            await nursery.start(agent.run)
            try:
                yield agent
            finally:
                await agent.stop()

    return running


@pytest.fixture
def band_conformance() -> Conformance:
    """`await band_conformance(factory, long_prompt=..., quick_prompt=...)`: every probe
    against the adapter `factory()` builds; the test fails with the table if one fails."""

    async def check(
        factory: Callable[[], Adapter], *, probes: Sequence[str] | None = None, **subject: Any
    ) -> list[Any]:
        chosen = select_probes(probes) if probes is not None else None
        results = await run_probes(Subject(factory, **subject), chosen)
        if not all(result.passed for result in results):
            pytest.fail(f"the adapter failed the conformance kit:\n{table(results)}")
        return results

    return check
