"""How fast an interrupt ends a command's whole process tree (`run_command`).

    .venv/bin/python benchmarks/stop_command.py --trials 20 [--kill-grace 2.0]

An agent with the command adapter runs `sh` trees of three processes (the
shell and two `sleep` grandchildren) on the embedded platform, one tree
honouring SIGTERM and one ignoring it (`trap '' TERM`, inherited by the
grandchildren). Each trial interrupts a running tree and measures from the
signal — the platform's log stamp of the outgoing `agent.control` frame — to
the moment the group is gone, as seen by a separate watcher process that
polls the tree's pids in /proc every 0.2 ms (a zombie counts as gone: PID 1
reaps the orphans late). Every stamp is `time.perf_counter`, which is
CLOCK_MONOTONIC: comparable across processes on one host. The watcher also
checks the whole group at the end: no member of it may be alive.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _stopwatch import control_frame_after

from band_trio import Agent, Policy
from band_trio.adapters import CommandAdapter
from band_trio.platform import Platform, open_platform

TREE = r"""
case "$(cat)" in ignore*) trap '' TERM ;; esac
sleep 30 & echo $! >> "$0/$BAND_MESSAGE_ID"
sleep 30 & echo $! >> "$0/$BAND_MESSAGE_ID"
echo $$ >> "$0/$BAND_MESSAGE_ID"
wait
"""

WATCHER = r"""
import os, sys, time
pgid, pids = int(sys.argv[1]), [int(p) for p in sys.argv[2:]]
def state(pid):
    try:
        stat = open(f"/proc/{pid}/stat", "rb").read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()
    return fields[0], int(fields[2])
def live(pid):
    found = state(pid)
    return found is not None and found[0] not in (b"Z", b"X")
print("ready", flush=True)
while any(live(pid) for pid in pids):
    time.sleep(0.0002)
gone = time.perf_counter()
left = [
    p for p in os.listdir("/proc")
    if p.isdigit() and (s := state(int(p))) and s[1] == pgid and s[0] not in (b"Z", b"X")
]
print(f"gone {gone!r} {len(left)}", flush=True)
"""


def written_pids(path: Path) -> list[int]:
    return [int(pid) for pid in path.read_text().split()] if path.exists() else []


async def tree_pids(path: Path) -> list[int]:
    """The tree's pids, leader last, once the script wrote all three (another process's
    write cannot be awaited: poll; the caller sets the deadline)."""
    while True:
        pids = written_pids(path)
        if len(pids) == 3:
            return pids
        await trio.sleep(0.002)


async def read_line(stream: trio.abc.ReceiveStream, buffer: bytearray) -> str:
    """The next line of `stream` (the watcher's), buffered in `buffer`."""
    while b"\n" not in buffer:
        chunk = await stream.receive_some()
        if not chunk:
            raise EOFError("the watcher ended early")
        buffer += chunk
    line, _, rest = bytes(buffer).partition(b"\n")
    buffer[:] = rest
    return line.decode()


async def trial(platform: Platform, agent: Agent, pid_dir: Path, mode: str) -> tuple[float, float]:
    """One interrupt of a running tree: (signal → group gone, the stop's own `took`)."""
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    stops_before = agent.remote_stops.sent
    message = platform.post_message(info.room_id, info.user_id, mode)
    pids = await tree_pids(pid_dir / message)
    watcher = await trio.lowlevel.open_process(
        [sys.executable, "-c", WATCHER, str(pids[-1]), *map(str, pids)],
        stdout=subprocess.PIPE,
    )
    assert watcher.stdout is not None
    buffer = bytearray()
    try:
        assert await read_line(watcher.stdout, buffer) == "ready"
        await trio.sleep(0.05)  # let the tree settle in its `wait`
        mark = len(platform.log())
        platform.send_control(info.agent_id, "interrupt", room_id=info.room_id)
        word, gone, left = (await read_line(watcher.stdout, buffer)).split()
        assert word == "gone" and left == "0", f"members of the group still alive: {left}"
        await platform.wait_until(lambda: control_frame_after(platform, mark) is not None)
        signalled = control_frame_after(platform, mark)
        assert signalled is not None
        await platform.wait_until(
            lambda: platform.delivery(message)[info.agent_id or ""]["status"] == "processed"
        )
        await agent.wait_until(lambda: agent.remote_stops.sent == stops_before + 1)
    finally:
        with trio.CancelScope(shield=True):
            await watcher.wait()  # it ends on its own once the group is gone
        await watcher.stdout.aclose()
    stop = agent.remote_stops.recent[-1]
    assert stop.message_id == message and stop.outcome.value == "confirmed", stop
    return float(gone) - signalled, stop.took


def row(name: str, samples: list[float]) -> str:
    ms = sorted(s * 1000 for s in samples)
    return f"| {name} | {len(ms)} | {statistics.median(ms):.2f} | {ms[0]:.2f} | {ms[-1]:.2f} |"


async def main(trials: int, kill_grace: float) -> None:
    rows: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as pid_dir:
        adapter = CommandAdapter(["sh", "-c", TREE, pid_dir])
        policy = Policy(subprocess_kill_grace=kill_grace)
        async with open_platform(seed=True) as platform, trio.open_nursery() as nursery:
            info = platform.info
            assert info.agent_id and info.api_key
            agent = Agent(
                adapter,
                agent_id=info.agent_id,
                api_key=info.api_key,
                rest_url=info.rest_url,
                ws_url=info.ws_url,
                policy=policy,
            )
            await nursery.start(agent.run)
            for mode, label in (("honour", "honours SIGTERM"), ("ignore", "ignores SIGTERM")):
                for _ in range(trials):
                    with trio.fail_after(kill_grace + 10):
                        gone, took = await trial(platform, agent, Path(pid_dir), mode)
                    rows.setdefault(f"{label}: signal → group gone", []).append(gone)
                    rows.setdefault(f"{label}: stop sent → confirmed", []).append(took)
            await agent.stop()
            nursery.cancel_scope.cancel()
    print(f"{trials} trials per row, kill grace {kill_grace:g} s (ms)\n")
    print("| interval | n | median | min | max |\n|---|---:|---:|---:|---:|")
    for name, samples in rows.items():
        print(row(name, samples))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--kill-grace", type=float, default=2.0)
    args = parser.parse_args()
    started = time.perf_counter()
    trio.run(main, args.trials, args.kill_grace)
    print(f"\n(total {time.perf_counter() - started:.1f} s)")
