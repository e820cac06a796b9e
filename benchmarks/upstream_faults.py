"""Upstream faults over real processes: `band-trio agent` against fault-injecting peers.

    .venv/bin/python benchmarks/upstream_faults.py [--trials 10] [--agent-src DIR] [--json]

The embedded platform runs in this process; the model server (stubllm 0.1.5) and
the A2A agent (a2a-sdk 1.3.0) run in their own, each behind the project's
fault-injecting proxy (src/band_trio/bench/_peers/fault_proxy.py); two
`band-trio agent` processes (`--adapter band_trio.adapters:openai_chat` and
`:a2a`) talk to the proxies. One fault per room, all rooms at once; for each row
the table gives how the message ended (the answer posted whole, or the error
event's words), the attempts the proxy saw, and the seconds from the post to the
message's final mark.

Then `--trials` interrupts during a backoff wait (a 503 with `Retry-After: 30`)
and as many during a stream (3 chunks into the `[slow]` answer): from the
platform's stamp of the outgoing `agent.control` frame to the platform's receipt
of the agent's consume mark (`POST .../processed`) — the cancellation as another
process sees it, mark included. The agent's "attempt 2 of 3 in …" log line (it
runs at `--log-level INFO`) says it is asleep before the interrupt is sent.

`--agent-src DIR` runs the agent processes from another source tree (e.g. the
main checkout's `src`), for a before/after of the same harness.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _stopwatch import control_frame_after, table

from band_trio.platform import Platform, open_platform
from peers import Peer, a2a_peer, fault_proxy, plan, stubllm_peer

SLOW = " ".join(f"w{i:02d}" for i in range(80))
A2A_ANSWER = "chunk 0 chunk 1 chunk 2"
WAIT = 60.0

OPENAI_ROWS: list[tuple[str, str, list[dict[str, Any]]]] = [
    ("429 twice, `Retry-After: 1`", "[slow] row-01.", [{"status": 429, "retry_after": "1"}] * 2),
    ("one 503", "[slow] row-02.", [{"status": 503}]),
    ("400", "[slow] row-03.", [{"status": 400, "body": '{"error": {"message": "bad request"}}'}]),
    (
        "stream ends cleanly with no `finish_reason` / `[DONE]`",
        "[slow] row-04.",
        [{"end_after": 3}],
    ),
    ("connection dropped after 3 chunks", "[slow] row-05.", [{"drop_after": 3}]),
    ("a corrupted chunk", "[slow] row-06.", [{"corrupt": 2}]),
    ("silent after 3 chunks (read timeout 2 s)", "[slow] row-07.", [{"stall_after": 3}]),
    (
        "`Retry-After: 120`, past the 60 s cap",
        "[slow] row-08.",
        [{"status": 429, "retry_after": "120"}],
    ),
    (
        "a 429 storm (10 times 429, 100 ms)",
        "[slow] row-09.",
        [{"status": 429, "retry_after_ms": 100}] * 10,
    ),
    ("a 500 with an endless body", "[slow] row-10.", [{"status": 500, "endless": True}]),
]
A2A_ROWS: list[tuple[str, str, list[dict[str, Any]]]] = [
    ("two 503s, `Retry-After: 1`", "row-01.", [{"status": 503, "retry_after": "1"}] * 2),
    ("one 503", "row-02.", [{"status": 503}]),
    ("400", "row-03.", [{"status": 400, "body": '{"error": "bad request"}'}]),
    ("connection reset before an answer", "row-04.", [{"reset": True}]),
    ("stream dropped after the task was named", "row-05.", [{"drop_after": 1}]),
    ("a corrupted frame", "row-06.", [{"corrupt": 1}]),
    ("silent before the first event (read timeout 2 s)", "row-07.", [{"stall": True}]),
]


@asynccontextmanager
async def agent_process(
    platform: Platform, agent_id: str, api_key: str, adapter: str, env: dict[str, str], src: str
) -> AsyncIterator[tuple[trio.Process, Lines]]:
    """`band-trio agent` for one identity; its stderr lines collected as they come."""
    info = platform.info
    environ = {
        **os.environ,
        **env,
        "BAND_REST_URL": info.rest_url,
        "BAND_WS_URL": info.ws_url,
        "BAND_AGENT_ID": agent_id,
        "BAND_API_KEY": api_key,
        "BAND_UPSTREAM_READ_TIMEOUT": "2",
    }
    if src:
        environ["PYTHONPATH"] = src
    argv = [sys.executable, "-m", "band_trio", "--log-level", "INFO", "agent"]
    proc = await trio.lowlevel.open_process(
        [*argv, "--adapter", f"band_trio.adapters:{adapter}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=environ,
    )
    lines = Lines()
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_collect, proc, lines)
            await platform.wait_until(lambda: agent_id in platform.connected_agents())
            yield proc, lines
            proc.send_signal(signal.SIGTERM)
            with trio.move_on_after(10):
                await proc.wait()
            nursery.cancel_scope.cancel()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


class Lines(list[str]):
    """An agent's stderr lines so far, and a way to wait for the next ones."""

    def __init__(self) -> None:
        super().__init__()
        self.changed = trio.Event()

    async def wait_for(self, text: str, since: int) -> None:
        while not any(text in line for line in self[since:]):
            await self.changed.wait()


async def _collect(proc: trio.Process, lines: Lines) -> None:
    assert proc.stderr is not None
    pending = b""
    while chunk := await proc.stderr.receive_some():
        pending += chunk
        *done, pending = pending.split(b"\n")
        lines.extend(line.decode("utf-8", "replace") for line in done)
        lines.changed.set()
        lines.changed = trio.Event()


def ended(platform: Platform, agent_id: str, message: str) -> str | None:
    entry = platform.delivery(message).get(agent_id)
    state = None if entry is None else str(entry["status"])
    return state if state in ("processed", "failed") else None


def settled(platform: Platform, agent_id: str, message: str) -> bool:
    return ended(platform, agent_id, message) is not None


def final_mark(platform: Platform, message: str) -> float:
    """The platform's stamp (perf_counter) of the message's `processed` or `failed` mark."""
    return max(
        e.t
        for e in platform.log()
        if e.kind == "rest"
        and e.path
        and (e.path.endswith(f"/{message}/processed") or e.path.endswith(f"/{message}/failed"))
    )


def outcome(platform: Platform, agent_id: str, room: str, whole: str) -> str:
    answers = [m.content for m in platform.messages(room) if m.sender_id == agent_id]
    errors = [e["content"] for e in platform.store.events(room) if e["message_type"] == "error"]
    if answers:
        verdict = "answered, whole" if answers == [whole] else f"ANSWERED {answers!r}"
        return verdict + (f" (and {len(errors)} error events)" if errors else "")
    return "failed: " + ("; ".join(errors) if errors else "(no error event)")


async def run_rows(
    platform: Platform,
    proxy: Peer,
    agent_id: str,
    user: str,
    rows: list[tuple[str, str, list[dict[str, Any]]]],
    text_of: Any,
    whole: str,
) -> list[dict[str, Any]]:
    rooms = [
        platform.create_room(title=name, participants=[user, agent_id]).id or ""
        for name, *_ in rows
    ]
    for _, tag, steps in rows:
        await plan(proxy, text_of(tag), steps)
    posted: dict[str, tuple[str, float]] = {}
    for room, (_, tag, _) in zip(rooms, rows, strict=True):
        posted[tag] = (platform.post_message(room, user, text_of(tag)), time.perf_counter())
    took: dict[str, float | None] = dict.fromkeys(posted)

    async def settle(tag: str, message: str, at: float) -> None:
        await platform.wait_until(lambda: settled(platform, agent_id, message))
        took[tag] = final_mark(platform, message) - at

    with trio.move_on_after(WAIT):  # the old code may sit out a stall for minutes
        async with trio.open_nursery() as nursery:
            for tag, (message, at) in posted.items():
                nursery.start_soon(settle, tag, message, at)
    return [
        {
            "fault": name,
            "outcome": (
                outcome(platform, agent_id, room, whole)
                if took[tag] is not None
                else f"still running after {WAIT:g} s"
            ),
            "attempts": sum(1 for e in proxy.events("request") if e["match"] == text_of(tag)),
            "seconds": None if took[tag] is None else round(took[tag] or 0.0, 2),
        }
        for room, (name, tag, _) in zip(rooms, rows, strict=True)
    ]


async def interrupts(
    platform: Platform,
    proxy: Peer,
    llm: Peer,
    agent_id: str,
    user: str,
    lines: Lines,
    trials: int,
) -> dict[str, list[float]]:
    """Signal → the consume mark, during a backoff wait and during a stream."""
    room = platform.create_room(title="interrupts", participants=[user, agent_id]).id or ""
    results: dict[str, list[float]] = {"during a backoff wait": [], "during a stream": []}
    for trial in range(trials):
        for where in results:
            text = f"[slow] {where} {trial}"
            if where == "during a backoff wait":
                await plan(proxy, text, [{"status": 503, "retry_after": "30"}])
            seen = len(lines)
            mark = llm.mark()
            message = platform.post_message(room, user, text)
            with trio.fail_after(WAIT):
                if where == "during a backoff wait":  # logged just before the sleep
                    await lines.wait_for("attempt 2 of 3 in 30.00 s", seen)
                else:
                    await llm.wait_for(lambda e: e["count"] >= 3, since=mark, event="chunk")
                since = platform.request_log.next_seq
                platform.send_control(agent_id, "interrupt", room_id=room, reason="enough")
                await platform.wait_until(
                    lambda m=message: ended(platform, agent_id, m) is not None
                )
            sent = control_frame_after(platform, since)
            marked = next(
                e.t
                for e in platform.log(since)
                if e.kind == "rest" and e.path and e.path.endswith(f"/{message}/processed")
            )
            assert sent is not None
            results[where].append(marked - sent)
    return results


async def main(args: argparse.Namespace) -> dict[str, Any]:
    async with (
        open_platform(seed=True) as platform,
        stubllm_peer(chunk_delay_ms=5) as llm,
        fault_proxy(llm.url) as llm_proxy,
        a2a_peer() as a2a,
        fault_proxy(a2a.base_url) as a2a_proxy,
    ):
        info = platform.info
        assert info.agent_id and info.api_key and info.user_id
        other = platform.create_agent(name="A2A bench agent")
        env = {"BAND_OPENAI_BASE_URL": llm_proxy.base_url + "/v1"}
        async with agent_process(
            platform, info.agent_id, info.api_key, "openai_chat", env, args.agent_src
        ) as (_, openai_lines):
            openai_rows = await run_rows(
                platform, llm_proxy, info.agent_id, info.user_id, OPENAI_ROWS, str, SLOW
            )
            stops = (
                await interrupts(
                    platform, llm_proxy, llm, info.agent_id, info.user_id, openai_lines, args.trials
                )
                if args.trials
                else {}
            )
        env = {"BAND_A2A_URL": a2a_proxy.url, "BAND_A2A_STREAMING": "yes"}
        assert other.api_key
        async with agent_process(platform, other.id, other.api_key, "a2a", env, args.agent_src):
            a2a_rows = await run_rows(
                platform,
                a2a_proxy,
                other.id,
                info.user_id,
                A2A_ROWS,
                lambda tag: f"mode=normal chunks=3 delay=0.05 {tag}",
                A2A_ANSWER,
            )
    return {"openai": openai_rows, "a2a": a2a_rows, "interrupts": stops}


def render(result: dict[str, Any]) -> str:
    out = []
    for name in ("openai", "a2a"):
        out += [
            f"\n{name}:",
            "| fault (before any output) | ended | attempts | s |",
            "|---|---|---:|---:|",
        ]
        out += [
            f"| {r['fault']} | {r['outcome']} | {r['attempts']} | {r['seconds']} |"
            for r in result[name]
        ]
    if result["interrupts"]:
        out += ["", "interrupt → the consume mark at the platform (ms):"]
        out.append(table(result["interrupts"]))
    return "\n".join(out)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--agent-src", default="", help="run the agents from this source tree")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = trio.run(main, args)
    if args.json:
        medians = {k: statistics.median(v) for k, v in result["interrupts"].items()}
        print(json.dumps({**result, "medians_s": medians}, indent=2))
    else:
        print(render(result))
