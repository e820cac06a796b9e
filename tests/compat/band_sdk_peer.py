"""The real, unmodified asyncio band-sdk agent, run as a subprocess by test_band_sdk.py.

    BAND_REST_URL=... BAND_WS_URL=... python band_sdk_peer.py AGENT_ID API_KEY

It replies `done: <text>` to every message, mentioning the sender, and runs
until SIGTERM/SIGINT (band-sdk's own `run_forever` handlers stop the agent and
return; the process then exits 0). band-sdk logs go to stderr.

This file is never imported by the trio test process: band-sdk is asyncio.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from typing import Any


def _scrub_session_env() -> None:
    """Drop env vars that band-sdk's `SessionConfig` would silently read.

    The test already passes a clean environment; this is the belt to its braces.
    """
    from band import SessionConfig

    fields = {name.lower() for name in SessionConfig.model_fields}
    for key in list(os.environ):
        if key.lower() in fields:
            del os.environ[key]


async def _main(agent_id: str, api_key: str) -> None:
    from band import Agent
    from band.core.simple_adapter import SimpleAdapter

    class DoneAdapter(SimpleAdapter[Any]):
        """Reply `done: <text>` to the sender: the smallest adapter that answers."""

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
            await tools.send_message(f"done: {msg.content}", mentions=[msg.sender_id])

    # ws_url / rest_url left as None: band-sdk resolves BAND_WS_URL / BAND_REST_URL itself.
    agent = Agent.create(adapter=DoneAdapter(), agent_id=agent_id, api_key=api_key)
    async with agent:
        await agent.run_forever()


def main() -> None:
    agent_id, api_key = sys.argv[1], sys.argv[2]
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    _scrub_session_env()
    asyncio.run(_main(agent_id, api_key))


if __name__ == "__main__":
    main()
