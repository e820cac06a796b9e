"""The adapter of the observability process tests (`--adapter observed_adapter:make`).

`hold` starts remote work, logs `holding` (with the turn's room and message id,
as every line inside a turn), and holds until aborted (its replay after a stop
answers `resumed`); anything else is answered at once.
"""

from __future__ import annotations

import logging

import trio

from band_trio import Adapter, StopOutcome, Turn

log = logging.getLogger("observed")


class Observed(Adapter):
    async def on_turn(self, turn: Turn) -> None:
        if turn.message.content != "hold":
            await turn.reply(f"echo: {turn.message.content}")
            return
        last = turn.last_abort
        if last is not None and last.kind == "stop" and last.message_id == turn.message.id:
            await turn.reply("resumed")
            return
        async with turn.remote(stop=_confirm, name="hold") as work:
            work.started(f"held-{turn.message.id}")
            log.info("holding %s", turn.message.id)  # the test waits for it: remote work started
            await trio.sleep_forever()


async def _confirm(handle: str) -> StopOutcome:
    return StopOutcome.CONFIRMED


def make() -> Observed:
    return Observed()
