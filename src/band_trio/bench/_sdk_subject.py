"""The band-sdk 6.0.1 agent under test: `python -m band_trio.bench._sdk_subject AGENT_ID KEY`.

The real, unmodified asyncio `band-sdk` agent (the `peer` extra) with a
`SimpleAdapter` that does what `_trio_subject` does, written the way a careful
band-sdk author would: stamp on `CancelledError` and re-raise; a command runs
in its own session and is terminated (then killed after 2 s) on cancel.
The URLs come from `BAND_REST_URL` / `BAND_WS_URL`, which band-sdk reads itself.

This module is run in its own process and never imported by trio code.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import time
from typing import Any

from ._protocol import BUSY, CMD, HOLD, TASKS, command_script, observe, parse_command

KILL_GRACE = 2.0


async def _run_group(argv: list[str]) -> None:
    proc = await asyncio.create_subprocess_exec(*argv, start_new_session=True)
    try:
        await proc.wait()
    except asyncio.CancelledError:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.shield(proc.wait()), KILL_GRACE)
        except (TimeoutError, asyncio.CancelledError):
            os.killpg(proc.pid, signal.SIGKILL)
        raise


async def _main(agent_id: str, api_key: str) -> None:
    from band import Agent
    from band.core.simple_adapter import SimpleAdapter

    class BenchAdapter(SimpleAdapter[Any]):
        async def on_message(
            self,
            msg: Any,
            tools: Any,
            history: Any,
            participants_msg: str | None,
            contacts_msg: str | None,
            *,
            is_session_bootstrap: bool,
            room_id: str,
        ) -> None:
            command = parse_command(msg.content)
            if command is None:
                await tools.send_message("ok", mentions=[msg.sender_id])
                return
            observe("enter", msg.id)
            try:
                if command.kind == HOLD:
                    await asyncio.Event().wait()
                elif command.kind == BUSY:
                    await asyncio.sleep(max(0.0, float(command.argument) - time.perf_counter()))
                elif command.kind == TASKS:
                    observe("tasks", msg.id, len(asyncio.all_tasks()))
                elif command.kind == CMD:
                    await _run_group(command_script(command.argument))
            except asyncio.CancelledError:
                observe("cancel", msg.id)
                raise
            observe("done", msg.id)
            await tools.send_message("ok", mentions=[msg.sender_id])

    agent = Agent.create(adapter=BenchAdapter(), agent_id=agent_id, api_key=api_key)
    async with agent:
        await agent.run_forever()


def main() -> None:
    agent_id, api_key = sys.argv[1], sys.argv[2]
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    for key in list(os.environ):  # band-sdk's SessionConfig reads unprefixed variables
        if not key.startswith(("BAND_", "PATH", "HOME", "LANG", "LC_", "TMP", "PYTHON")):
            del os.environ[key]
    asyncio.run(_main(agent_id, api_key))


if __name__ == "__main__":
    main()
