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
        if turn.message.content.startswith("sleep"):
            try:
                await trio.sleep(30)
            except trio.Cancelled:
                return  # never do this: the turn ends as if it had succeeded
        await turn.reply("done")

async def test_my_adapter(band_conformance):
    await band_conformance(Swallower)
"""


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
