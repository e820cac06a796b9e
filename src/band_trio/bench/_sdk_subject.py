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
import contextlib
import json
import logging
import os
import signal
import sys
import time
import uuid
from typing import Any

from ._protocol import (
    A2A,
    BUSY,
    CMD,
    HOLD,
    LLM,
    TASKS,
    command_script,
    exit_with_driver,
    observe,
    parse_command,
)

KILL_GRACE = 2.0
CANCEL_DEADLINE = 5.0


async def _stream_llm(base_url: str, prompt: str) -> str:
    """A streamed chat completion; leaving the `stream` block closes the connection,
    which is how an OpenAI-style server learns of the abort."""
    import httpx

    body = {"model": "gpt-4o", "stream": True, "messages": [{"role": "user", "content": prompt}]}
    parts: list[str] = []
    async with (
        httpx.AsyncClient(timeout=60) as client,
        client.stream("POST", f"{base_url}/chat/completions", json=body) as response,
    ):
        async for line in response.aiter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                delta = json.loads(line[6:])["choices"][0].get("delta", {})
                parts.append(delta.get("content") or "")
    return "".join(parts)


async def _stream_a2a(url: str, text: str) -> str:
    """An A2A task over JSON-RPC (0.3 method names); on cancel, `tasks/cancel` first."""
    import httpx

    message = {
        "kind": "message", "role": "user", "messageId": uuid.uuid4().hex,
        "parts": [{"kind": "text", "text": text}],
    }  # fmt: skip
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "message/stream",
        "params": {"message": message},
    }
    task_id = None
    async with httpx.AsyncClient(timeout=60) as client:
        try:
            async with client.stream("POST", url, json=request) as response:
                async for line in response.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    result = json.loads(line[5:]).get("result") or {}
                    task_id = task_id or (
                        result.get("id") if result.get("kind") == "task" else result.get("taskId")
                    )
            return "done"
        except asyncio.CancelledError:
            if task_id is not None:
                cancel = {
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "tasks/cancel",
                    "params": {"id": task_id},
                }
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(
                        asyncio.shield(client.post(url, json=cancel)), CANCEL_DEADLINE
                    )
            raise


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
                elif command.kind == LLM:
                    await _stream_llm(*command.split())
                elif command.kind == A2A:
                    await _stream_a2a(*command.split())
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
    exit_with_driver()
    for key in list(os.environ):  # band-sdk's SessionConfig reads unprefixed variables
        if not key.startswith(("BAND_", "PATH", "HOME", "LANG", "LC_", "TMP", "PYTHON")):
            del os.environ[key]
    asyncio.run(_main(agent_id, api_key))


if __name__ == "__main__":
    main()
