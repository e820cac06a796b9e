"""An adapter whose work is asyncio code (`run_asyncio`), for the commands' tests
(`--adapter asyncio_adapter:make`, run with this folder as the cwd).

`sleep=N` in the text keeps the asyncio side at work N seconds; `gate` keeps it at
work until the file named by `ASYNCIO_ADAPTER_GATE` exists (30 s at most); then it
answers "asyncio echo: TEXT". Each start and each cancel of the asyncio side is appended to
the file named by `ASYNCIO_ADAPTER_LOG`, so a test sees what happened there.
"""

from __future__ import annotations

import asyncio
import os
import re

from band_trio import Adapter, Turn
from band_trio.contract import run_asyncio

_SLEEP = re.compile(r"sleep=(\d+(?:\.\d+)?)")


def _log(line: str) -> None:
    path = os.environ.get("ASYNCIO_ADAPTER_LOG")
    if path:
        with open(path, "a") as log:
            log.write(line + "\n")


async def _think(content: str) -> str:
    match = _SLEEP.search(content)
    _log(f"started {content}")
    try:
        await asyncio.sleep(float(match.group(1)) if match else 0.0)
        gate = os.environ.get("ASYNCIO_ADAPTER_GATE", "")
        for _ in range(3000 if "gate" in content and gate else 0):
            if os.path.exists(gate):  # noqa: ASYNC240 (a stat, in a test helper)
                break
            await asyncio.sleep(0.01)
    except asyncio.CancelledError:
        _log(f"cancelled {content}")
        raise
    return f"asyncio echo: {content}"


class AsyncioEcho(Adapter):
    async def on_turn(self, turn: Turn) -> None:
        await turn.reply(await run_asyncio(_think, turn.message.content))


def make() -> AsyncioEcho:
    return AsyncioEcho()
