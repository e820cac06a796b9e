"""What a peer that never answers, and a flood, cost band-trio (issue 21): times and RSS.

    python benchmarks/hostile_peers.py [--only stop,threads,flood]

Run it once per checkout to compare (PYTHONPATH=<old src> for the old code: what the
old code lacks is reported as n/a). Every wait is capped (`CAP`): "> CAP" means it
had not ended by then, and the work was killed.

stop     the second SIGTERM of `agent`, `bridge`, `host` and `runs-api`, each a
         process whose A2A peer accepts the request and never answers: SIGTERM →
         exit, seconds; and in one process (the default policy, the real clock):
         the bridge leaving the room, `Bridge.close()` with a 0.5 s grace
threads  40 turns aborted in `run_in_thread`, then `getaddrinfo("localhost")`
flood    200,000 pushes while a turn (a forward) holds the room: the runtime room's
         and the bridge room's queue, and the OpenCode reader's events while its
         turn does not read: what is held, and the process's RSS growth
cut      the bridge, one process: an interrupt cuts a forward's start held by the
         silent peer; the requests the peer got for that message in the next 15 s
         (retries every 0.5 s), and the message's status
base     `runs-api` and `agent` with an adapter whose turn raises `SystemExit(3)`
         (tests/cli/base_exits.py), then one that answers: the process, and the next
left     the bridge with an A2A target (a real a2a-sdk peer): 20 rooms each answered
         once and left: the A2A contexts the target still keeps
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx2
import trio
import trio.testing

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
from band_trio.platform import Platform, open_platform  # noqa: E402
from peers import SilentPeer, silent_peer  # noqa: E402

CAP = 30.0
FLOOD = 200_000
KEY = "a-runs-api-key-of-16+"
HOST_TOKEN = "host-token-0123456789abcdef"
"""The host's token (`BAND_HOST_TOKEN`); code from before the host checked one ignores it."""


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


# -- stop --------------------------------------------------------------------------


async def second_signal(
    argv: list[str], env: dict[str, str], ready: Callable[[], Awaitable[None]]
) -> str:
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "band_trio", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **env},
    )
    try:
        with trio.fail_after(CAP):
            await ready()
        process.send_signal(signal.SIGTERM)
        await trio.sleep(0.3)  # the first signal taken (a graceful stop under way)
        process.send_signal(signal.SIGTERM)
        sent = time.perf_counter()
        with trio.move_on_after(CAP):
            code = await process.wait()
            return f"{time.perf_counter() - sent:.2f} s (exit {code})"
        return f"> {CAP:g} s"
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


def identity_env(platform: Platform) -> dict[str, str]:
    info = platform.info
    return {
        "BAND_REST_URL": info.rest_url,
        "BAND_WS_URL": info.ws_url,
        "BAND_AGENT_ID": info.agent_id or "",
        "BAND_API_KEY": info.api_key or "",
    }


def status(platform: Platform, message_id: str) -> str | None:
    entry = platform.delivery(message_id).get(platform.info.agent_id or "")
    return None if entry is None else str(entry["status"])


def a2a_identity(platform: Platform, url: str) -> Any:
    """The seeded agent as a bridge identity whose target is the A2A agent at `url`."""
    from band_trio.bridge import A2ATargetConfig, IdentityConfig

    info = platform.info
    return IdentityConfig(
        name=info.agent_id or "",
        agent_id=info.agent_id or "",
        api_key=info.api_key or "",
        rest_url=info.rest_url,
        ws_url=info.ws_url,
        target=A2ATargetConfig(url=url, streaming=True),
    )


def seeded(platform: Platform) -> tuple[str, str, str]:
    info = platform.info
    return info.agent_id or "", info.room_id or "", info.user_id or ""


def envelope(platform: Platform, message_id: str) -> dict[str, Any]:
    agent, room, user = seeded(platform)
    return {
        "event_type": "message_created", "agent_id": agent, "room_id": room,
        "payload": {"id": message_id, "content": "hi", "message_type": "text",
                    "sender_type": "User", "sender_id": user,
                    "inserted_at": "2026-12-01T00:00:00Z", "updated_at": "2026-12-01T00:00:00Z"},
        "forwarded_at": "2026-12-01T00:00:00Z",
    }  # fmt: skip


async def post_quietly(url: str, body: dict[str, Any], headers: dict[str, str]) -> None:
    async with httpx2.AsyncClient(timeout=None) as client:
        with contextlib.suppress(httpx2.HTTPError):
            await client.post(url, json=body, headers=headers)


async def listening(port: int) -> None:
    while True:
        try:
            stream = await trio.open_tcp_stream("127.0.0.1", port)
        except OSError:
            await trio.sleep(0.05)
        else:
            await stream.aclose()
            return


class Case:
    """One command against a silent A2A peer: its argv and what 'held' takes."""

    def __init__(self, platform: Platform, peer: SilentPeer, nursery: trio.Nursery) -> None:
        self.platform = platform
        self.peer = peer
        self.nursery = nursery
        self.env = {
            **identity_env(platform),
            "BAND_A2A_STREAMING": "yes",
            "BAND_A2A_URL": peer.url,
            "BAND_RUNS_API_KEY": KEY,
            "BAND_HOST_TOKEN": HOST_TOKEN,
        }
        self.port = _free_port()

    async def a_message_held(self) -> None:
        platform = self.platform
        _, room, user = seeded(platform)
        await platform.wait_until(lambda: bool(platform.connected_agents()))
        platform.post_message(room, user, "hi")
        await self.peer.wait_requests(1)

    async def an_envelope_held(self) -> None:
        _, room, user = seeded(self.platform)
        message = self.platform.post_message(room, user, "hi")
        await listening(self.port)
        url = f"http://127.0.0.1:{self.port}/"
        auth = {"authorization": f"Bearer {HOST_TOKEN}"}
        self.nursery.start_soon(post_quietly, url, envelope(self.platform, message), auth)
        await self.peer.wait_requests(1)

    async def a_run_held(self) -> None:
        await listening(self.port)
        auth = {"authorization": f"Bearer {KEY}"}
        url = f"http://127.0.0.1:{self.port}/v1/runs"
        self.nursery.start_soon(post_quietly, url, {"input": "hi"}, auth)
        await self.peer.wait_requests(1)

    def bridge_config(self) -> str:
        info = self.platform.info
        config = Path(tempfile.mkdtemp()) / "bridge.json"
        target = {"type": "a2a", "url": self.peer.url, "streaming": True}
        config.write_text(
            json.dumps(
                {
                    "bridge": {"rest_url": info.rest_url, "ws_url": info.ws_url},
                    "identity": [
                        {"agent_id": info.agent_id, "api_key": info.api_key, "target": target}
                    ],
                }
            )
        )
        return str(config)


async def stop_commands() -> dict[str, str]:
    found: dict[str, str] = {}
    a2a = "band_trio.adapters:a2a"
    for name in ("agent", "bridge", "host", "runs-api"):
        async with (
            open_platform(seed=True) as platform,
            silent_peer() as peer,
            trio.open_nursery() as nursery,
        ):
            case = Case(platform, peer, nursery)
            listen = f"127.0.0.1:{case.port}"
            argv, ready = {
                "agent": (["agent", "--adapter", a2a], case.a_message_held),
                "bridge": (["bridge", "--config", case.bridge_config()], case.a_message_held),
                "host": (["host", "--adapter", a2a, "--listen", listen], case.an_envelope_held),
                "runs-api": (
                    ["runs-api", "--adapter", a2a, "--port", str(case.port)],
                    case.a_run_held,
                ),
            }[name]
            found[f"{name}: second SIGTERM → exit"] = await second_signal(argv, case.env, ready)
            nursery.cancel_scope.cancel()
    return found


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def bridge_in_process() -> dict[str, str]:
    found: dict[str, str] = {}
    for case in ("leave", "close"):
        async with open_platform(seed=True) as platform, silent_peer() as peer:
            what, took = await _bridge_case(platform, peer, case)
            found[what] = took
    return found


async def _bridge_case(platform: Platform, peer: SilentPeer, case: str) -> tuple[str, str]:
    from band_trio.bridge import Bridge, BridgeConfig, BridgePolicy

    agent, room, user = seeded(platform)
    ident = a2a_identity(platform, peer.url)
    config = BridgeConfig((ident,), None)
    bridge = Bridge(config, bridge_policy=BridgePolicy(shutdown_grace=0.5))
    done = trio.Event()

    async def run() -> None:
        await bridge.run()
        done.set()

    def idle() -> bool:
        rooms = bridge.identities[agent].rooms
        return rooms is not None and rooms.in_flight == 0

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        await platform.wait_until(lambda: bool(platform.connected_agents()))
        platform.post_message(room, user, "hi")
        await peer.wait_requests(1)
        began = time.perf_counter()
        with trio.move_on_after(CAP) as waited:
            if case == "leave":
                platform.remove_participant(room, agent)
                await bridge.wait_until(idle)
            else:
                bridge.close()
                await done.wait()
        took = time.perf_counter() - began
        nursery.cancel_scope.cancel()
    what = {
        "leave": "bridge in one process: a left room's forward ended",
        "close": "bridge in one process: close() with a 0.5 s grace returned",
    }[case]
    return what, f"> {CAP:g} s" if waited.cancelled_caught else f"{took:.2f} s"


# -- threads ----------------------------------------------------------------------


async def threads() -> dict[str, str]:
    from band_trio.contract import Message, Turn, TurnControl, run_in_thread

    class NoPort:
        async def post_message(self, *a: object) -> str:
            raise AssertionError

        async def post_event(self, *a: object) -> str:
            raise AssertionError

        async def history(self) -> list[Message]:
            raise AssertionError

        async def participants(self) -> list[Any]:
            raise AssertionError

    release = threading.Event()
    scopes = [trio.CancelScope() for _ in range(40)]

    async def one(n: int) -> None:
        message = Message(id=f"m{n}", room_id="r", content="", sender_id="u", sender_type="User")
        port: Any = NoPort()
        turn = Turn(message, port, control=TurnControl("r", message.id, stop_grace=0.2))
        with scopes[n]:
            await run_in_thread(turn, release.wait, 60)

    try:
        async with trio.open_nursery() as nursery:
            for n in range(40):
                nursery.start_soon(one, n)
            await trio.sleep(0.5)  # every thread started (or waiting for a slot)
            for scope in scopes:
                scope.cancel()
        began = time.perf_counter()
        with trio.move_on_after(CAP) as waited:
            await trio.socket.getaddrinfo("localhost", 80)
        took = (
            f"> {CAP:g} s"
            if waited.cancelled_caught
            else f"{(time.perf_counter() - began) * 1000:.1f} ms"
        )
    finally:
        release.set()
    return {"getaddrinfo after 40 aborted threads": took}


# -- flood ------------------------------------------------------------------------


def wire(n: int) -> Any:
    from band_trio.wire import MessageCreated

    return MessageCreated(
        id=f"m{n}",
        content="x" * 200,
        message_type="text",
        sender_type="User",
        sender_id="u",
        inserted_at="2026-12-01T00:00:00Z",
        updated_at="2026-12-01T00:00:00Z",
    )


async def flood_runtime_room() -> str:
    from band_trio import Policy
    from band_trio.policy import BusyPolicy
    from band_trio.runtime._context import Changes, Journal, RoomContext
    from band_trio.runtime._inbound import inbound
    from band_trio.runtime._ledger import Ledger
    from band_trio.runtime._room import Room
    from band_trio.runtime._stops import RemoteStopLog

    policy = Policy()
    nothing: Any = None
    ctx = RoomContext(
        agent_id="a",
        rest=nothing,
        adapter=nothing,
        policy=policy,
        busy=BusyPolicy(),
        changes=Changes(),
        journal=Journal(),
        stops=RemoteStopLog(),
    )
    room = Room("r", ctx, Ledger(max_attempts=1, memory=500))
    before = rss_mb()
    for n in range(FLOOD):
        room.push(inbound("r", "a", wire(n)))
    grew = rss_mb() - before
    return f"{room.queued} messages queued, RSS +{grew:.0f} MB"


async def flood_opencode() -> str:
    from band_trio.adapters._opencode_events import subscribe
    from band_trio.policy import UpstreamPolicy

    async def serve(stream: trio.SocketStream) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            head += await stream.receive_some()
        await stream.send_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n")
        await stream.send_all(b'data: {"type": "server.connected", "properties": {}}\n\n')
        frame = json.dumps({"type": "message.part.delta",
                            "properties": {"sessionID": "s1", "delta": "x" * 200}})  # fmt: skip
        chunk = f"data: {frame}\n\n".encode() * 1000
        for _ in range(FLOOD // 1000):
            await stream.send_all(chunk)
        await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            functools.partial(trio.serve_tcp, serve, 0, host="127.0.0.1")
        )
        port = listeners[0].socket.getsockname()[1]
        before = rss_mb()
        async with (
            httpx2.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client,
            subscribe(client, "s1", {}, UpstreamPolicy()) as events,
        ):
            await trio.testing.wait_all_tasks_blocked()  # the server and the reader both wait
            held = events.send.statistics().current_buffer_used
            grew = rss_mb() - before
        nursery.cancel_scope.cancel()
    return f"{held} events held, RSS +{grew:.0f} MB"


async def flood() -> dict[str, str]:
    return {
        f"runtime room: {FLOOD} pushes while a turn runs": await flood_runtime_room(),
        f"OpenCode reader: {FLOOD} events the turn does not read": await flood_opencode(),
    }


# -- cut ----------------------------------------------------------------------------


async def cut() -> dict[str, str]:
    from band_trio.bridge import Bridge, BridgeConfig, BridgePolicy

    async with open_platform(seed=True) as platform, silent_peer() as peer:
        agent, room, user = seeded(platform)
        ident = a2a_identity(platform, peer.url)
        policy = BridgePolicy(retry_first=0.5, retry_max=0.5, shutdown_grace=0.5)
        bridge = Bridge(BridgeConfig((ident,), None), bridge_policy=policy)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(bridge.run)
            await platform.wait_until(lambda: bool(platform.connected_agents()))
            message = platform.post_message(room, user, "hi")
            await peer.wait_requests(1)
            platform.send_control(agent, "interrupt", room_id=room)
            await trio.sleep(15)  # the cut (the stop grace, 5 s), then any retries
            state = status(platform, message)
            requests = peer.requests
            bridge.close()  # the nursery waits for its run to return
            nursery.cancel_scope.deadline = trio.current_time() + CAP
    return {
        "bridge: an interrupt cuts a held start: requests for that message in 15 s": (
            f"{requests}, the message {state}"
        )
    }


# -- base -----------------------------------------------------------------------------


async def base_exceptions() -> dict[str, str]:
    cwd = HERE.parent / "tests" / "cli"  # base_exits.py
    found: dict[str, str] = {}
    port = _free_port()
    argv = ["runs-api", "--adapter", "base_exits:raises", "--port", str(port)]
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "band_trio", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "BAND_RUNS_API_KEY": KEY},
        cwd=cwd,
    )
    try:
        with trio.fail_after(CAP):
            await listening(port)
        auth = {"authorization": f"Bearer {KEY}"}
        url = f"http://127.0.0.1:{port}"
        ended = []
        async with httpx2.AsyncClient(base_url=url, headers=auth, timeout=CAP) as client:
            for text in ("raise SystemExit", "still there?"):
                try:
                    run_id = (await client.post("/v1/runs", json={"input": text})).json()["run_id"]
                    with trio.move_on_after(5):
                        while True:  # until the run ends (a benchmark may poll)
                            got = (await client.get(f"/v1/runs/{run_id}")).json()
                            if got.get("status") not in ("queued", "running"):
                                break
                            await trio.sleep(0.05)
                    ended.append(str(got.get("status")))
                except (httpx2.HTTPError, ValueError, KeyError) as exc:
                    ended.append(f"lost ({type(exc).__name__})")
        with trio.move_on_after(1):  # a server that is dying: its exit status
            await process.wait()
        alive = "running" if process.returncode is None else f"exited {process.returncode}"
        found["runs-api: a run's sys.exit(3), then another run"] = (
            f"runs {', '.join(ended)}; the server {alive}"
        )
    finally:
        if process.returncode is None:
            process.terminate()
            await process.wait()
    async with open_platform(seed=True) as platform:
        _, room, user = seeded(platform)
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "band_trio", "agent", "--adapter", "base_exits:raises"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, **identity_env(platform)},
            cwd=cwd,
        )
        try:
            with trio.fail_after(CAP):
                await platform.wait_until(lambda: bool(platform.connected_agents()))
            first = platform.post_message(room, user, "raise SystemExit")
            with trio.move_on_after(5):
                await process.wait()
            then = platform.post_message(room, user, "still there?")
            with trio.move_on_after(5):
                await platform.wait_until(lambda: status(platform, then) == "processed")
            with trio.move_on_after(1):
                await process.wait()
            alive = "running" if process.returncode is None else f"exited {process.returncode}"
            found["agent: a turn's sys.exit(3), then another message"] = (
                f"{status(platform, first)}, then {status(platform, then)}; the agent {alive}"
            )
        finally:
            if process.returncode is None:
                process.terminate()
                await process.wait()
    return found


# -- left -----------------------------------------------------------------------------


async def left_rooms() -> dict[str, str]:
    from band_trio.bridge import Bridge, BridgeConfig
    from peers.fixtures import a2a_peer

    rooms_count = 20
    async with open_platform(seed=True) as platform, a2a_peer() as peer:
        agent, _, user = seeded(platform)
        ident = a2a_identity(platform, peer.url)
        bridge = Bridge(BridgeConfig((ident,), None))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(bridge.run)
            await platform.wait_until(lambda: bool(platform.connected_agents()))
            identity = bridge.identities[agent]
            for n in range(rooms_count):
                room = platform.create_room(f"room {n}", [user, agent]).id
                message = platform.post_message(room, user, "mode=quick hi")
                with trio.fail_after(CAP):
                    await platform.wait_until(lambda m=message: status(platform, m) == "processed")
                platform.remove_participant(room, agent)
            with trio.move_on_after(3):  # the leaves told (or not) by then
                await bridge.wait_until(lambda: False)
            rooms: Any = identity._rooms  # the bridge's rooms are the runtime's (one machine)
            target: Any = rooms._context.adapter._target
            kept = len(target._adapter._rooms)
            bridge.close()
            nursery.cancel_scope.deadline = trio.current_time() + CAP
    return {f"bridge, A2A target: {rooms_count} rooms answered and left": f"{kept} contexts kept"}


async def main(only: set[str]) -> None:
    results: dict[str, str] = {}
    for name, part in (
        ("stop", stop_commands),
        ("stop", bridge_in_process),
        ("threads", threads),
        ("flood", flood),
        ("cut", cut),
        ("base", base_exceptions),
        ("left", left_rooms),
    ):
        if only and name not in only:
            continue
        try:
            results.update(await part())
        except Exception as exc:  # an API the old code does not have
            results[f"{name}: {part.__name__}"] = f"n/a ({type(exc).__name__}: {exc})"[:160]
    import band_trio

    print(f"band_trio from {Path(band_trio.__file__).parent}")
    for what, value in results.items():
        print(f"| {what} | {value} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--only", default="", help="comma-separated: stop, threads, flood, cut, base, left"
    )
    args = parser.parse_args()
    trio.run(main, {p for p in args.only.split(",") if p})
