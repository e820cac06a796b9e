"""`band-trio platform --outbound-queue N`: the websocket queue is the command's to set
(issue 38, item 6). Before, only a program running the platform itself could change it
(the benchmark raised it to 65,536), and a bad value had nowhere to be refused."""

from __future__ import annotations

import json
from pathlib import Path

import httpx2
import pytest
import trio
from test_cli_errors import EXIT_CONFIG, one_line, run
from test_commands import process, read_until
from trio_websocket import open_websocket_url

from band_trio.cli import main


async def test_a_bad_outbound_queue_is_one_line_and_exit_2() -> None:
    """As a user types it, in a process of its own, once; the values below in this one."""
    done = await run("platform", "--outbound-queue", "0")
    assert done.returncode == EXIT_CONFIG
    assert one_line(done) == (
        "band-trio: --outbound-queue takes a whole number of frames from 1 to 1048576, not '0'"
    )


@pytest.mark.parametrize("value", ["-3", "x", "1e3", "2.5", "", "²", "1048577"])
def test_each_bad_outbound_queue_is_refused_before_anything_starts(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["platform", "--outbound-queue", value]) == EXIT_CONFIG
    err = capsys.readouterr().err
    assert err == (
        "band-trio: --outbound-queue takes a whole number of frames from 1 to 1048576, "
        f"not {value!r}\n"
    )


async def test_the_platform_command_takes_its_queue_and_pushes_back_on_a_pipelining_client(
    tmp_path: Path,
) -> None:
    """With a queue of 4, a client that pipelines 400 heartbeats and reads gets all 400
    replies: the platform waited for it (`socket_backpressure`) and cut nothing off."""
    ready = tmp_path / "ready.json"
    count = 400
    with trio.fail_after(30):
        async with process(
            "platform", "--seed", "--ready-file", str(ready), "--outbound-queue", "4"
        ) as proc:
            assert proc.stdout is not None
            await read_until(proc.stdout, b"listening")
            info = json.loads(ready.read_text())
            url = f"{info['ws_url']}?vsn=2.0.0&agent_id={info['agent_id']}"
            headers = [(b"x-api-key", info["api_key"].encode())]
            async with open_websocket_url(url, extra_headers=headers) as ws:

                async def pipeline() -> None:
                    for n in range(count):
                        await ws.send_message(f'[null,"{n}","phoenix","heartbeat",{{}}]')

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(pipeline)
                    refs = [json.loads(await ws.get_message())[1] for _ in range(count)]
            assert refs == [str(n) for n in range(count)]
            async with httpx2.AsyncClient() as client:
                stats = (await client.get(f"{info['admin_url']}/stats")).json()
    assert stats["socket_backpressure"] > 0
    assert stats["sockets_stalled"] == stats["sockets_overflowed"] == 0
