"""What open console pages cost, and what a page that stops reading cannot do.

One state per watched room per change, shared by every stream of that room; at
most `console_streams` streams (one more is a 503 with a message for the
person); and a stream that is never read neither grows the platform nor holds
its shutdown.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx2
import trio
from test_console import message, stream

from band_trio.platform import open_platform
from band_trio.policy import PlatformPolicy, ServerPolicy
from support import seeded

DEADLINE = 10


async def stalled_page(port: int, room_id: str) -> trio.SocketStream:
    """A console stream whose reader takes the response head and then nothing more,
    with a small receive buffer: the platform's writes to it stall at once."""
    sock = trio.socket.socket()
    sock.setsockopt(trio.socket.SOL_SOCKET, trio.socket.SO_RCVBUF, 4096)
    await sock.connect(("127.0.0.1", port))
    page = trio.SocketStream(sock)
    await page.send_all(
        f"GET /_console/api/stream?room={room_id} HTTP/1.1\r\n"
        f"host: 127.0.0.1:{port}\r\n\r\n".encode()
    )
    head = b""
    with trio.fail_after(DEADLINE):
        while b"\r\n\r\n" not in head:
            head += await page.receive_some(1)
    assert head.startswith(b"HTTP/1.1 200"), head
    return page


async def test_streams_over_the_cap_are_503_with_a_message_for_the_person() -> None:
    policy = PlatformPolicy(console_streams=3)
    async with (
        open_platform(seed=True, console=True, policy=policy) as console,
        httpx2.AsyncClient(base_url=console.info.rest_url) as http,
    ):
        _, room_id, _ = seeded(console)
        with trio.fail_after(DEADLINE):
            async with stream(http, room_id) as one, stream(http) as two, stream(http) as three:
                for live in (one, two, three):
                    await live.next_state()
                refused = await http.get("/_console/api/stream")
                assert refused.status_code == 503
                error = refused.json()["error"]
                assert error["code"] == "too_many_streams"
                assert "3 pages open" in error["message"] and "close a tab" in error["message"]
                assert refused.headers["retry-after"] == "1"
                assert console.listening is not None
            async with stream(http, room_id) as again:  # a page closed: room for one more
                await again.next_state()


async def test_a_rooms_state_is_built_once_per_change_for_all_its_streams() -> None:
    async with (
        open_platform(seed=True, console=True) as console,
        httpx2.AsyncClient(base_url=console.info.rest_url) as http,
    ):
        _, room_id, user_id = seeded(console)
        pages = console.policy.console_streams
        with trio.fail_after(DEADLINE):
            async with trio.open_nursery() as nursery:
                opened: list[object] = []
                done = trio.Event()

                async def page(*, task_status: trio.TaskStatus[None]) -> None:
                    async with stream(http, room_id) as live:
                        await live.next_state()
                        task_status.started()
                        await live.until(lambda s: message(s, "last") is not None)
                        opened.append(live)
                        if len(opened) == pages:
                            done.set()

                for _ in range(pages):
                    await nursery.start(page)
                before = console.stats["console_states_built"]
                for n in range(20):
                    console.post_message(room_id, user_id, f"message {n}")
                console.post_message(room_id, user_id, "last")
                await done.wait()
            # 21 changes, `pages` streams: each state built once (coalesced, maybe
            # fewer), never once per stream
            assert console.stats["console_states_built"] - before <= 21
            await console.wait_until(lambda: console.stats["console_streams"] == 0)


async def test_a_stream_that_is_never_read_is_dropped_and_holds_nothing() -> None:
    """A state much larger than the socket buffers, and a page that never reads: its
    write stalls, and after `send_stall` the platform drops it."""
    policy = PlatformPolicy(server=ServerPolicy(send_stall=0.5))
    async with (
        open_platform(seed=True, console=True, policy=policy) as console,
        httpx2.AsyncClient(base_url=console.info.rest_url) as http,
    ):
        _, room_id, user_id = seeded(console)
        for n in range(100):
            console.post_message(room_id, user_id, f"{n}" + "x" * 19_999)
        port = int(console.info.rest_url.rsplit(":", 1)[1])
        with trio.fail_after(DEADLINE):
            async with await stalled_page(port, room_id) as page:
                assert page is not None  # ...and never read
                for n in range(3):  # every change is another whole state to write
                    console.post_message(room_id, user_id, f"more {n}")
                await console.wait_until(lambda: console.stats["clients_stalled"] == 1)
                await console.wait_until(lambda: console.stats["console_streams"] == 0)
            other = await http.get("/_admin/stats")  # the platform serves on meanwhile
        assert other.status_code == 200 and other.json()["clients_stalled"] == 1


async def test_sigterm_ends_the_platform_whatever_its_console_streams_do(
    tmp_path: Path,
) -> None:
    """Twenty pages that never read a 2 MB state, over a real process: SIGTERM ends
    it, exit 0 (SIGTERM, a second SIGTERM and SIGINT were all ignored for 150 s
    before every write was bounded)."""
    ready = tmp_path / "ready.json"
    argv = [
        sys.executable, "-m", "band_trio", "platform", "--console", "--seed",
        "--ready-file", str(ready),
    ]  # fmt: skip
    process = await trio.lowlevel.open_process(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=os.environ
    )
    pages: list[trio.SocketStream] = []
    try:
        with trio.fail_after(DEADLINE):
            while not ready.exists():
                await trio.sleep(0.05)  # polling a file another process writes
        info = json.loads(ready.read_text())
        port = int(info["rest_url"].rsplit(":", 1)[1])
        json_body = {"content-type": "application/json"}
        async with httpx2.AsyncClient(base_url=info["admin_url"], headers=json_body) as admin:
            for n in range(100):
                body = {"sender_id": info["user_id"], "content": f"{n}" + "y" * 19_999}
                posted = await admin.post(f"/rooms/{info['room_id']}/messages", json=body)
                assert posted.status_code == 201
        for _ in range(20):
            pages.append(await stalled_page(port, info["room_id"]))  # ...never read again
        process.send_signal(signal.SIGTERM)
        with trio.fail_after(DEADLINE):
            code = await process.wait()
        assert process.stderr is not None
        err = (await process.stderr.receive_some(65536)).decode()
        assert code == 0, err
        assert "Traceback" not in err
    finally:
        for page in pages:
            await page.aclose()
        if process.returncode is None:
            process.kill()
            await process.wait()
