"""`band-trio conformance MODULE:FACTORY` as a real process: table, JSON, exit status."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import trio

BAND_TRIO = [str(Path(sys.executable).with_name("band-trio"))]  # the console script

SWALLOWER = """
import trio
from band_trio import Adapter, Turn

class Swallower(Adapter):
    async def on_turn(self, turn: Turn) -> None:
        if turn.message.content.startswith("sleep"):
            try:
                await trio.sleep(30)
            except trio.Cancelled:
                return  # the bug the kit is for
        await turn.reply("done")
"""


async def conformance(*args: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # MODULE from the cwd
    with trio.fail_after(120):
        return await trio.run_process(
            [*BAND_TRIO, "conformance", *args],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            cwd=cwd,
            env=env,
        )


async def test_a_conforming_adapter_exits_0_with_the_table_and_the_json(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    done = await conformance("band_trio.adapters:demo", "--json", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    text = done.stdout.decode()
    assert "| interrupt mid-work | passed |" in text
    assert "| remote stop sent once per abort | not applicable |" in text
    results = json.loads(out.read_text())
    assert {r["outcome"] for r in results} == {"passed", "not applicable"}
    assert all(set(r) == {"probe", "outcome", "passed", "latency_s", "observed"} for r in results)


async def test_a_swallowing_adapter_exits_1_naming_the_probe(tmp_path: Path) -> None:
    (tmp_path / "mine.py").write_text(SWALLOWER)
    done = await conformance("mine:Swallower", cwd=tmp_path)
    assert done.returncode == 1
    text = done.stdout.decode()
    assert "| a swallowed cancellation is reported | failed |" in text
    assert "swallowed the cancellation" in text
    assert b"Traceback" not in done.stderr


async def test_a_factory_that_cannot_be_built_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = await conformance("no_such_module:x", cwd=tmp_path)
    assert done.returncode == 2
    lines = [line for line in done.stderr.decode().splitlines() if line.strip()]
    assert len(lines) == 1 and "cannot load adapter" in lines[0]
