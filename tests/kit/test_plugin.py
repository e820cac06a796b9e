"""The pytest plugin, as an adapter author's suite meets it (installed via `pytest11`)."""

from __future__ import annotations

import pytest
import trio

from band_trio.adapters import DemoAdapter
from band_trio.platform import Platform


async def test_band_conformance_passes_a_conforming_adapter(band_conformance) -> None:  # type: ignore[no-untyped-def]
    results = await band_conformance(DemoAdapter)
    assert [r.outcome for r in results].count("failed") == 0
    assert len(results) >= 9


async def test_band_agent_runs_an_adapter_on_band_platform(
    band_platform: Platform,
    band_agent,  # type: ignore[no-untyped-def]
) -> None:
    info = band_platform.info
    assert info.room_id and info.user_id and info.agent_id
    with trio.fail_after(10):
        async with band_agent(DemoAdapter()) as agent:
            assert agent.connected
            message = band_platform.post_message(info.room_id, info.user_id, "hi")
            await band_platform.wait_until(
                lambda: band_platform.delivery(message)[info.agent_id]["status"] == "processed"
            )


SWALLOWER = """
import trio
from band_trio import Adapter, Turn

class Swallower(Adapter):
    async def on_turn(self, turn: Turn) -> None:
        if turn.message.content == "sleep=30":  # the kit's long prompt
            try:
                await trio.sleep(30)
            except trio.Cancelled:
                return  # never do this: the turn ends as if it had succeeded
        await turn.reply("done")

async def test_my_adapter(band_conformance):
    await band_conformance(Swallower)
"""


@pytest.mark.long(18)
def test_a_failing_adapter_fails_the_authors_test_with_the_table(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini("[pytest]\ntrio_mode = true\n")
    pytester.makepyfile(test_mine=SWALLOWER)
    result = pytester.runpytest_subprocess("-q", "-p", "trio", timeout=120)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*the adapter failed the conformance kit*", "*swallowed the cancellation*"]
    )


AUTHORS_TEST = """
async def test_demo_conforms(band_platform):
    assert band_platform.info.room_id

async def test_my_own_async_test_is_left_alone():
    pass
"""


def test_a_test_using_the_fixtures_runs_without_trio_mode(pytester: pytest.Pytester) -> None:
    """No `trio_mode`, no marker: the plugin marks the tests that ask for its fixtures
    (docs/tutorial/writing-an-adapter.md, step 4, runs that way); the author's other
    async tests are theirs to mark."""
    pytester.makepyfile(test_mine=AUTHORS_TEST)
    result = pytester.runpytest("-q", "-p", "trio")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*test_my_own_async_test_is_left_alone*"])
    assert "test_demo_conforms" not in "\n".join(
        line for line in result.stdout.lines if line.startswith("FAILED")
    )


def test_without_pytest_trio_the_fixtures_say_what_to_install(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_mine=AUTHORS_TEST)
    result = pytester.runpytest("-q", "-p", "no:trio")
    result.assert_outcomes(errors=1, failed=1)
    result.stdout.fnmatch_lines(
        ["*(band_platform) are trio fixtures and need pytest-trio*band-trio[[]pytest[]]*"]
    )
