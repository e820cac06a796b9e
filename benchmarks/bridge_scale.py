"""One bridge process for many identities: start-up, memory, shutdown, signal latency.

    .venv/bin/python benchmarks/bridge_scale.py --identities 1 200 1000 [--trials 200]
        [--json FILE] [--profile DIR] [--policy JSON] [--src OLD/src]

Three kinds of process, all on loopback, as a user would run them:

* the embedded platform (`band-trio platform`), fresh for each size, seeded
  through its admin API with N agents, one user and one room per agent;
* this script: the driver, and the HTTP target every identity forwards to
  (`band_trio.testing.RecordingTarget` on hypercorn: `200 {}` at once, or held
  open for the signal trials);
* the bridge (`band-trio bridge --config FILE`), a fresh process for each size,
  one identity per agent, `settle = "bridge"`.

Per size it measures:

* **all connected after launch**: the bridge process spawned → its
  `ready: N of N identities connected` line (every identity's link has joined
  its rooms), with the CPU seconds the bridge and the platform spent meanwhile
  (a platform near one CPU second per second is the bottleneck, not the bridge);
* **RSS**: the bridge's `VmRSS` once every identity is connected and idle,
  per identity (RSS / N) and marginal (RSS - the one-identity RSS) / (N - 1);
* **signal → cancel**: a message to a random identity's room, held open by the
  target; an interrupt sent for that room; from the platform's stamp of the
  outgoing `agent.control` frame to the target seeing the forward's request
  close (both `time.perf_counter()`, one clock across processes on Linux);
  p50 and p99 over `--trials`;
* **SIGTERM → exit**: the signal sent → the process gone, with its exit status;
  "closed cleanly" is the bridge's own last line (`stopped: N of N identities
  closed`, and nothing cancelled after the shutdown grace, no cleanup overran),
  then the platform's live connections afterwards (0: every socket closed) and
  the bridge's WARNING/ERROR lines from the signal on (none).

`--profile DIR` also runs the largest size once under `py-spy record`, attached
by pid (the start-up's samples in DIR/startup-N.txt, summed by function in
DIR/startup-N-top.txt, and the platform's meanwhile in DIR/startup-N-platform*.txt;
the SIGTERM's teardown likewise in DIR/shutdown-N*.txt),
and once under tracemalloc (DIR/tracemalloc-N.txt: the top allocations once
connected).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import trio

from band_trio.testing import RecordingTarget, open_recording_target

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
WAIT = 120.0
"""Every wait of the driver has this deadline (a size that cannot start fails loudly)."""


@dataclass
class Figures:
    identities: int
    connected_s: float
    bridge_cpu_s: float
    platform_cpu_s: float
    rss_kib: int
    hwm_kib: int
    exit_s: float
    exit_status: int
    closed_cleanly: int
    live_after_exit: int
    load: str
    signalled_at: float
    """When the SIGTERM was sent (`time.perf_counter()`: the bridge's clock too)."""
    cpu_before_exit: float
    """The bridge's CPU seconds when the SIGTERM was sent."""
    platform_exit_cpu: float
    """The platform's CPU seconds from the SIGTERM to the bridge's exit."""
    signal_ms: list[float] = field(default_factory=list)
    complaints: list[str] = field(default_factory=list)
    """The bridge's WARNING and ERROR lines from the SIGTERM on (a forward cancelled
    after the grace, a close that overran): none for a clean stop."""

    @property
    def per_identity_kib(self) -> float:
        return self.rss_kib / self.identities


def _cpu_seconds(pid: int) -> float:
    """utime + stime of a live process, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _memory_kib(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of a live process, in KiB."""
    values: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0])
    return values["VmRSS"], values["VmHWM"]


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


class Lines:
    """The lines a child writes to one pipe, read by a task of the driver."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.changed = trio.Event()

    async def pump(self, stream: trio.abc.ReceiveStream) -> None:
        buffer = b""
        async for chunk in stream:
            buffer += chunk
            *done, buffer = buffer.split(b"\n")
            self.lines.extend(line.decode("utf-8", "replace") for line in done)
            self.changed.set()
            self.changed = trio.Event()

    async def wait_for(self, text: str) -> str:
        while True:
            for line in self.lines:
                if text in line:
                    return line
            await self.changed.wait()


@asynccontextmanager
async def _process(
    argv: list[str], nursery: trio.Nursery, *, env: dict[str, str] | None = None
) -> AsyncIterator[tuple[trio.Process, Lines]]:
    """A child with its stdout and stderr read into `Lines`; killed (by its pid) if
    still alive at the end of the block."""
    process = await trio.lowlevel.open_process(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    lines = Lines()
    assert process.stdout is not None and process.stderr is not None
    nursery.start_soon(lines.pump, process.stdout)
    nursery.start_soon(lines.pump, process.stderr)
    try:
        yield process, lines
    finally:
        if process.returncode is None:
            process.kill()
        with trio.move_on_after(10, shield=True):
            await process.wait()


@dataclass
class Seeded:
    rest_url: str
    ws_url: str
    admin_url: str
    pid: int
    user_id: str
    agents: list[tuple[str, str, str]]
    """(agent_id, api_key, room_id) per identity."""


async def _seed(ready: dict[str, Any], n: int) -> Seeded:
    admin = ready["admin_url"]
    agents: list[tuple[str, str, str]] = []
    async with httpx2.AsyncClient(base_url=admin, timeout=30) as client:
        user = (await client.post("/users", json={"name": "bench user"})).json()["id"]
        limiter = trio.CapacityLimiter(8)

        async def one(index: int) -> None:
            async with limiter:
                agent = (await client.post("/agents", json={"name": f"agent {index}"})).json()
                room = await client.post(
                    "/rooms", json={"title": f"room {index}", "participants": [agent["id"], user]}
                )
                agents.append((agent["id"], agent["api_key"], room.json()["id"]))

        async with trio.open_nursery() as nursery:
            for index in range(n):
                nursery.start_soon(one, index)
    agents.sort()
    return Seeded(ready["rest_url"], ready["ws_url"], admin, ready["pid"], user, agents)


def _config(seeded: Seeded, target: str, folder: Path, policy: dict[str, Any]) -> Path:
    data = {
        "bridge": {
            "health": "127.0.0.1:0",
            "rest_url": seeded.rest_url,
            "ws_url": seeded.ws_url,
            "policy": policy,
        },
        "identity": [
            {"agent_id": agent, "api_key": key, "target": {"type": "http", "url": target}}
            for agent, key, _ in seeded.agents
        ],
    }
    path = folder / "bridge.json"
    path.write_text(json.dumps(data))
    return path


async def _signal_trials(
    seeded: Seeded, target: RecordingTarget, trials: int, rng: random.Random
) -> list[float]:
    """Interrupt a held forward of a random identity; platform stamp → request closed."""
    samples: list[float] = []
    async with httpx2.AsyncClient(base_url=seeded.admin_url, timeout=30) as admin:
        for _ in range(trials):
            agent, _key, room = rng.choice(seeded.agents)
            seen = len(target.received)
            target.hold = True
            with trio.fail_after(WAIT):
                posted = await admin.post(
                    f"/rooms/{room}/messages",
                    json={"sender_id": seeded.user_id, "content": "held"},
                )
                message = posted.json()["id"]
                await target.wait_until(
                    lambda m=message, s=seen: m in target.message_ids()[s:]  # type: ignore[misc]
                )
                mark = (await admin.get("/log", params={"since": 1 << 60})).json()["next"]
                await admin.post(
                    "/control", json={"agent_id": agent, "mode": "interrupt", "room_id": room}
                )
                received = next(
                    r for r in target.received[seen:] if r.envelope.message_id == message
                )
                await received.closed.wait()
                sent = None
                while sent is None:
                    for entry in (await admin.get("/log", params={"since": mark})).json()[
                        "entries"
                    ]:
                        frame = entry.get("frame") or ""
                        if entry["kind"] == "ws_out" and '"agent.control"' in frame:
                            sent = entry["t"]
                            break
                # the bridge consumes the interrupted message: wait for its mark
                while True:
                    delivery = (await admin.get(f"/messages/{message}")).json()["delivery"]
                    if delivery.get(agent, {}).get("status") == "processed":
                        break
                    await trio.sleep(0.005)
            target.release_all()
            assert received.closed_at is not None
            samples.append(received.closed_at - sent)
    return samples


async def _measure(
    n: int,
    trials: int,
    folder: Path,
    policy: dict[str, Any],
    bridge_command: list[str] | None = None,
    platform_command: list[str] | None = None,
    env: dict[str, str] | None = None,
) -> Figures:
    """One size, one fresh platform and bridge. `bridge_command` and `platform_command`
    replace `band-trio` (a wrapper that runs the CLI, for an experiment)."""
    band_trio = str(BIN / "band-trio")
    ready_file = folder / f"ready-{n}.json"
    async with trio.open_nursery() as nursery:
        platform_argv = [*(platform_command or [band_trio]), "platform", "--port", "0"]
        platform_argv += ["--ready-file", str(ready_file)]
        async with (
            _process(platform_argv, nursery, env=env) as (platform, platform_lines),
            open_recording_target() as target,
        ):
            with trio.fail_after(WAIT):
                await platform_lines.wait_for("band-trio platform listening")
                seeded = await _seed(json.loads(ready_file.read_text()), n)
            config = _config(seeded, target.url, folder, policy)
            load = _load()
            platform_cpu = _cpu_seconds(platform.pid)
            launched = time.perf_counter()
            bridge_argv = [*(bridge_command or [band_trio]), "bridge", "--config", str(config)]
            async with _process(bridge_argv, nursery, env=env) as (bridge, lines):
                with trio.fail_after(WAIT):
                    ready = await lines.wait_for("ready:")
                connected = time.perf_counter() - launched
                bridge_cpu = _cpu_seconds(bridge.pid)
                platform_cpu = _cpu_seconds(platform.pid) - platform_cpu
                if f"ready: {n} of {n} identities connected" not in ready:
                    said = "\n".join(line for line in lines.lines if "WARNING" in line)
                    raise AssertionError(f"{ready}\n{said[:4000]}")
                health_url = ready.rsplit("health on ", 1)[1].strip()
                async with httpx2.AsyncClient(timeout=30) as client:
                    with trio.fail_after(WAIT):  # every room's start-up catch-up done
                        while True:
                            identities = (await client.get(health_url)).json()["identities"]
                            if all(i["forwards_in_flight"] == 0 for i in identities):
                                break
                            await trio.sleep(0.1)
                rss, hwm = _memory_kib(bridge.pid)
                samples = await _signal_trials(seeded, target, trials, random.Random(n))
                before_exit = len(lines.lines)
                cpu_before_exit = _cpu_seconds(bridge.pid)
                platform_before_exit = _cpu_seconds(platform.pid)
                signalled = time.perf_counter()
                bridge.send_signal(signal.SIGTERM)
                with trio.fail_after(WAIT):
                    status = await bridge.wait()
                exit_s = time.perf_counter() - signalled
                platform_exit_cpu = _cpu_seconds(platform.pid) - platform_before_exit
            async with httpx2.AsyncClient(base_url=seeded.admin_url, timeout=30) as admin:
                with trio.fail_after(WAIT):  # the platform notices every close
                    while (live := (await admin.get("/stats")).json()["connections_live"]) > 0:
                        if time.perf_counter() - signalled > 5:
                            break
                        await trio.sleep(0.05)
            platform.send_signal(signal.SIGTERM)
            with trio.fail_after(WAIT):
                await platform.wait()
        nursery.cancel_scope.cancel()
    stopped = next((line for line in lines.lines if "band-trio bridge: stopped:" in line), "")
    closed = int(stopped.split("stopped: ", 1)[1].split(" ", 1)[0]) if stopped else 0
    complaints = [
        line for line in lines.lines[before_exit:] if " WARNING " in line or " ERROR " in line
    ]
    return Figures(
        identities=n,
        connected_s=connected,
        bridge_cpu_s=bridge_cpu,
        platform_cpu_s=platform_cpu,
        rss_kib=rss,
        hwm_kib=hwm,
        exit_s=exit_s,
        exit_status=status,
        closed_cleanly=closed if stopped.endswith(" identities closed") else 0,
        complaints=complaints,
        live_after_exit=live,
        load=load,
        signalled_at=signalled,
        cpu_before_exit=cpu_before_exit,
        platform_exit_cpu=platform_exit_cpu,
        signal_ms=[s * 1000 for s in samples],
    )


def _table(rows: list[Figures]) -> str:
    one = next((r for r in rows if r.identities == 1), None)
    lines = [
        "| identities | all connected after launch | bridge CPU / platform CPU meanwhile "
        "| bridge RSS | per identity | marginal per identity | SIGTERM → exit "
        "| closed cleanly | signal → cancel p50 / p99 | load |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        marginal = (
            f"{(r.rss_kib - one.rss_kib) / (r.identities - 1):.0f} KiB"
            if one is not None and r.identities > 1
            else "-"
        )
        signal_cell = (
            f"{statistics.median(r.signal_ms):.2f} / {_percentile(r.signal_ms, 0.99):.2f} ms"
            if r.signal_ms
            else "-"
        )
        lines.append(
            f"| {r.identities:,} | {r.connected_s:.2f} s | {r.bridge_cpu_s:.2f} s / "
            f"{r.platform_cpu_s:.2f} s | {r.rss_kib / 1024:.0f} MiB | "
            f"{r.per_identity_kib:.0f} KiB | {marginal} | {r.exit_s:.2f} s "
            f"(exit {r.exit_status}) | {r.closed_cleanly} of {r.identities}, "
            f"{r.live_after_exit} live, {len(r.complaints)} warnings | {signal_cell} | {r.load} |"
        )
    return "\n".join(lines)


async def _profile(n: int, folder: Path, out: Path, policy: dict[str, Any]) -> None:
    """The start-up under py-spy (attached by pid at once, stopped at the ready line),
    the SIGTERM's teardown likewise, and a tracemalloc snapshot once connected."""
    band_trio = str(BIN / "band-trio")
    for mode in ("py-spy", "tracemalloc"):
        ready_file = folder / f"ready-profile-{mode}.json"
        ready_file.unlink(missing_ok=True)
        async with trio.open_nursery() as nursery:
            platform_argv = [band_trio, "platform", "--port", "0", "--ready-file", str(ready_file)]
            async with (
                _process(platform_argv, nursery) as (platform, platform_lines),
                open_recording_target() as target,
            ):
                with trio.fail_after(WAIT):
                    await platform_lines.wait_for("band-trio platform listening")
                    seeded = await _seed(json.loads(ready_file.read_text()), n)
                config = _config(seeded, target.url, folder, policy)
                bridge_args = ["bridge", "--config", str(config)]
                snapshot = out / f"tracemalloc-{n}.txt"
                if mode == "py-spy":
                    argv = [band_trio, *bridge_args]
                else:
                    argv = [sys.executable, str(HERE / "_traced_bridge.py"), str(snapshot)]
                    argv += bridge_args
                async with _process(argv, nursery) as (process, lines):
                    if mode == "py-spy":
                        raw = out / f"startup-{n}.txt"
                        spy_argv = [str(BIN / "py-spy"), "record", "--rate", "250", "--format"]
                        spy_argv += ["raw", "-o", str(raw), "--pid", str(process.pid)]
                        spy = await trio.lowlevel.open_process(spy_argv, stdout=subprocess.DEVNULL)
                        platform_raw = out / f"startup-{n}-platform.txt"
                        platform_spy = await trio.lowlevel.open_process(
                            [*spy_argv[:-3], str(platform_raw), "--pid", str(platform.pid)],
                            stdout=subprocess.DEVNULL,
                        )
                    with trio.fail_after(WAIT * 5):
                        await lines.wait_for("ready:")
                        if mode == "tracemalloc":
                            process.send_signal(signal.SIGUSR1)
                            await lines.wait_for("tracemalloc snapshot written")
                        else:
                            for each in (spy, platform_spy):
                                each.send_signal(signal.SIGINT)
                                await each.wait()
                            _summarise(raw, out / f"startup-{n}-top.txt")
                            _summarise(platform_raw, out / f"startup-{n}-platform-top.txt")
                            raw = out / f"shutdown-{n}.txt"  # the teardown, once more
                            spy_argv[-3:] = [str(raw), "--pid", str(process.pid)]
                            spy = await trio.lowlevel.open_process(
                                spy_argv, stdout=subprocess.DEVNULL
                            )
                            await trio.sleep(1)  # py-spy attached and sampling
                    process.send_signal(signal.SIGTERM)
                    with trio.fail_after(WAIT):
                        await process.wait()
                    if mode == "py-spy":
                        with trio.fail_after(WAIT):
                            await spy.wait()  # it writes its samples once the process is gone
                        _summarise(raw, out / f"shutdown-{n}-top.txt")
                platform.send_signal(signal.SIGTERM)
                with trio.fail_after(WAIT):
                    await platform.wait()
            nursery.cancel_scope.cancel()
        print(f"profile ({mode}) written to {out}", file=sys.stderr)


def _summarise(raw: Path, out: Path, top: int = 60) -> None:
    """py-spy's collapsed stacks → the functions by inclusive and by own samples."""
    inclusive: dict[str, int] = {}
    own: dict[str, int] = {}
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        total += count
        frames = stack.split(";")
        for frame in set(frames):
            inclusive[frame] = inclusive.get(frame, 0) + count
        own[frames[-1]] = own.get(frames[-1], 0) + count
    lines = [f"{total} samples", "", "## inclusive"]
    for frame, count in sorted(inclusive.items(), key=lambda kv: -kv[1])[:top]:
        lines.append(f"{100 * count / total:5.1f}%  {frame}")
    lines += ["", "## own"]
    for frame, count in sorted(own.items(), key=lambda kv: -kv[1])[:top]:
        lines.append(f"{100 * count / total:5.1f}%  {frame}")
    out.write_text("\n".join(lines) + "\n")


async def _main(args: argparse.Namespace) -> None:
    policy: dict[str, Any] = json.loads(args.policy)
    rows: list[Figures] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        env = None
        if args.src is not None:  # the platform and the bridge from another tree
            env = {**os.environ, "PYTHONPATH": str(args.src.resolve())}
        for n in args.identities:
            figures = await _measure(n, args.trials, folder, policy, env=env)
            rows.append(figures)
            print(_table([*(r for r in rows if r.identities == 1), figures]), file=sys.stderr)
        if args.profile is not None:
            await _profile(max(args.identities), folder, args.profile, policy)
    print(_table(rows))
    if args.json is not None:
        data = [asdict(r) | {"per_identity_kib": r.per_identity_kib} for r in rows]
        args.json.write_text(json.dumps(data, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--identities", type=int, nargs="+", default=[1, 200, 1000])
    parser.add_argument("--trials", type=int, default=200, help="signal trials per size")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--profile", type=Path, help="also profile the largest size into DIR")
    parser.add_argument(
        "--policy", default="{}", help="BridgePolicy fields for [bridge] policy, as JSON"
    )
    parser.add_argument(
        "--src",
        type=Path,
        help="run the platform and the bridge from this src/ folder (an older checkout: "
        "the before of a before/after); the driver and its target stay this tree's",
    )
    args = parser.parse_args()
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
    trio.run(_main, args)


if __name__ == "__main__":
    main()
