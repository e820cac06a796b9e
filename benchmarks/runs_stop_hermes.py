"""The runs API's stop side by side: band-trio and the real Hermes Agent 0.19.0, in one run,
against one stubllm.

    .venv/bin/python benchmarks/runs_stop_hermes.py --trials 20 [--upstream-wait 20] \
        [--chunk-delay-ms 50] [--hermes-logs DIR] [--json]

Four processes on one host: this client (trio), stubllm 0.1.5 streaming the 80-chunk
`[slow]` answer 50 ms a chunk (--chunk-delay-ms; its events read through a FIFO as they
are written, as in runs_stop.py), `band-trio runs-api --adapter band_trio.adapters:openai_chat`, and
`hermes gateway run` (hermes-agent 0.19.0 with aiohttp 3.14.1, installed once in a venv of
its own, `.tools/hermes`, made with the machine's `python3`; its HERMES_HOME, config.yaml
and .env in a temporary folder of this run, set up as docs/how-to/runs-api.md says). Both
servers listen on 127.0.0.1 with ports and keys of their own, and both use the same
stubllm as their model.

Trials alternate band-trio, Hermes / Hermes, band-trio. Each starts a run whose prompt
names the trial (so stubllm's request, and so its stream, is told apart from any other),
subscribes to the run's event stream, waits until stubllm has sent 3 chunks of that
stream, and sends a bare `POST /v1/runs/{id}/stop` (no `?wait`: Hermes 0.19 has none).
Each interval starts at this client's `perf_counter()` just before the stop is written and
ends at:

* `run.cancelled` read from the run's event stream;
* stubllm's stamp of that stream's end: its generator cancelled (the client closed it) or
  its `[DONE]` sent (read to its natural end); "not within --upstream-wait s" otherwise.
  The content chunks stubllm sent after the stop are counted;
* the stop's answer.

Right after `run.cancelled` and the answer: a second stop of the same run (Hermes 0.19
answers 404: its references are dropped once the run ends; band-trio 200 with the run's
state), and the floor: a bare round trip on the same kept-alive connection (the trial's
own, warmed by one request) to `GET /health` and `GET /v1/runs/{id}`. The event
stream is read once, on one connection, from the start: Hermes 0.19 has one queue per run
and no replay, so nothing re-attaches.

Each run waits for its upstream stream to end (or --upstream-wait) before the next trial,
so the two servers never stream at once. Every process is stopped by its own PID at the
end, on an error or Ctrl-C too (runs_stop.owned_process, open_peer).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
import trio
from runs_stop import WAIT, Raw, owned_process, p90, runs_api, watch_events

from band_trio.bench._peer import Event, Peer, open_peer

ROOT = Path(__file__).resolve().parent.parent
HERMES_VENV = ROOT / ".tools" / "hermes"
HERMES_PINS = ("hermes-agent==0.19.0", "aiohttp==3.14.1")
BAND_KEY = "bench-band-0123456789abcdef"
HERMES_KEY = "bench-hermes-0123456789abcdef"
READY_DEADLINE = 90.0
"""How long each server may take to answer its readiness check (Hermes imports a lot)."""


def hermes_setup() -> str:
    """Make `.tools/hermes` once (a venv of the machine's python3 with the pins); its
    hermes-agent version."""
    python = str(HERMES_VENV / "bin" / "python")
    probe = "import importlib.metadata as m; print(m.version('hermes-agent'), m.version('aiohttp'))"
    wanted = " ".join(pin.split("==")[1] for pin in HERMES_PINS)
    if not os.path.exists(python):
        subprocess.run(["python3", "-m", "venv", str(HERMES_VENV)], check=True)
    found = subprocess.run([python, "-c", probe], capture_output=True, text=True, check=False)
    if found.stdout.strip() != wanted:
        print(f"setting up {HERMES_VENV}: pip install {' '.join(HERMES_PINS)}", file=sys.stderr)
        pip = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        subprocess.run([*pip, *HERMES_PINS], check=True)
        found = subprocess.run([python, "-c", probe], capture_output=True, text=True, check=True)
    return found.stdout.split()[0]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _healthy(url: str, process: trio.Process, log: Path) -> None:
    """Poll `GET /health` until 200, within READY_DEADLINE; fail at once if it exits."""
    async with httpx2.AsyncClient(base_url=url, timeout=2.0) as client:
        with trio.fail_after(READY_DEADLINE):
            while True:
                if process.returncode is not None:
                    tail = (await trio.Path(log).read_text(errors="replace"))[-2000:]
                    raise RuntimeError(f"hermes gateway exited ({process.returncode}):\n{tail}")
                try:
                    if (await client.get("/health")).status_code == 200:
                        return
                except httpx2.HTTPError:
                    pass
                await trio.sleep(0.05)


def _copy_logs(home: Path, logs: Path) -> None:
    logs.mkdir(parents=True, exist_ok=True)
    if (home / "logs").is_dir():
        shutil.copytree(home / "logs", logs, dirs_exist_ok=True)
    shutil.copy(home / "gateway.out", logs / "gateway.out")


@asynccontextmanager
async def hermes_gateway(
    base_url: str, key: str = HERMES_KEY, logs: Path | None = None
) -> AsyncIterator[str]:
    """`hermes gateway run` with a fresh HERMES_HOME pointed at `base_url`; its URL once
    `/health` answers. Its logs are copied to `logs` at the end, if given."""
    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="band-bench-hermes-") as folder:
        home = Path(folder)
        (home / "config.yaml").write_text(
            "model:\n  provider: custom\n"
            f'  base_url: "{base_url}"\n'
            "  default: gpt-4o\n  context_length: 131072\n"
            "toolsets: []\nagent:\n  api_max_retries: 1\n"
        )
        (home / ".env").write_text(
            f"API_SERVER_ENABLED=true\nAPI_SERVER_KEY={key}\nAPI_SERVER_HOST=127.0.0.1\n"
            f"API_SERVER_PORT={port}\nOPENAI_API_KEY=sk-local-dummy\n"
        )
        env = {
            "PATH": f"{HERMES_VENV / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "HOME": folder,
            "HERMES_HOME": folder,
            "LANG": os.environ.get("LANG", "C.UTF-8"),
        }
        log = home / "gateway.out"
        argv = [str(HERMES_VENV / "bin" / "hermes"), "gateway", "run"]
        try:
            with log.open("wb") as out:
                async with owned_process(
                    argv, env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT
                ) as process:
                    url = f"http://127.0.0.1:{port}"
                    await _healthy(url, process, log)
                    yield url
        finally:  # the gateway has stopped: owned_process's exit waited for it
            if logs is not None:
                _copy_logs(home, logs)


@dataclass
class Side:
    """One server under test and what was measured of it."""

    name: str
    url: str
    key: str
    client: httpx2.AsyncClient
    rows: dict[str, list[float]] = field(default_factory=dict)
    upstream: list[float | None] = field(default_factory=list)
    """POST /stop → the upstream stream's end, or None: not within --upstream-wait."""
    ends: Counter[str] = field(default_factory=Counter)
    after: list[int] = field(default_factory=list)
    """Content chunks stubllm sent after the stop, per trial."""
    second_stop: Counter[int] = field(default_factory=Counter)
    answers: Counter[str] = field(default_factory=Counter)
    statuses: Counter[str] = field(default_factory=Counter)
    """The run's status right after `run.cancelled` (its GET /v1/runs/{id})."""


def _content_chunks(peer: Peer, since: int, req: int, after: float) -> int:
    return sum(
        1
        for e in peer.events[since:]
        if e.get("event") == "chunk"
        and e.get("req") == req
        and e.get("kind") == "content"
        and e["perf"] > after
    )


async def _stream_of(peer: Peer, since: int, tag: str) -> int:
    """The req of the streamed completion whose request carries `tag`, once it sent 3 chunks."""

    def asked(e: Event) -> bool:
        return (
            e.get("event") == "request"
            and e.get("path") == "/v1/chat/completions"
            and isinstance(e.get("body"), dict)
            and bool(e["body"].get("stream"))
            and tag in json.dumps(e["body"])
        )

    req = int((await peer.wait(since, asked))["req"])
    await peer.wait(
        since, lambda e: e.get("event") == "chunk" and e.get("req") == req and e["count"] >= 3
    )
    return req


async def _trial(side: Side, peer: Peer, label: str, upstream_wait: float, record: bool) -> None:
    # A connection of the trial's own, warmed by one request: a server closes a connection
    # left idle while the other server's trial ran (hypercorn after 5 s).
    raw = await Raw.open(side.url, side.key)
    async with raw.stream:
        status, _ = await raw.send(raw.build("GET", "/health"))
        assert status == 200, status
        await _stop_one(side, raw, peer, label, upstream_wait, record)


async def _stop_one(
    side: Side, raw: Raw, peer: Peer, label: str, upstream_wait: float, record: bool
) -> None:
    since = len(peer.events)
    tag = f"[slow] tell me a long story ({label})"
    answer = await side.client.post("/v1/runs", json={"input": tag})
    assert answer.status_code == 202, answer.text
    run_id = answer.json()["run_id"]
    stamp: dict[str, float] = {}
    with trio.fail_after(WAIT):
        async with trio.open_nursery() as nursery:
            subscribed = trio.Event()
            nursery.start_soon(watch_events, side.url, run_id, stamp, subscribed, side.key)
            await subscribed.wait()
            req = await _stream_of(peer, since, tag)
            request = raw.build("POST", f"/v1/runs/{run_id}/stop", b'{"reason": "bench"}')
            sent = time.perf_counter()
            status, body = await raw.send(request)
            answered = time.perf_counter()
            assert status == 200, body
    # right away, while Hermes may still be reading the stream (idle, the connection could
    # be closed by the server before the stream's end): a second stop, and the floor
    status2, _ = await raw.send(raw.build("POST", f"/v1/runs/{run_id}/stop"))
    floors: list[tuple[str, float]] = []
    for path, name in (
        ("/health", "floor: GET /health"),
        (f"/v1/runs/{run_id}", "floor: GET /v1/runs/{id}"),
    ):
        request = raw.build("GET", path)
        began = time.perf_counter()
        status, state = await raw.send(request)
        floors.append((name, time.perf_counter() - began))
        assert status == 200, (path, status)
    end: Event | None = None
    with trio.move_on_after(max(0.0, sent + upstream_wait - time.perf_counter())):
        end = await peer.wait(
            since,
            lambda e: (
                e.get("event") in ("stream_cancelled", "stream_completed") and e.get("req") == req
            ),
        )
    if not record:
        return
    rows = side.rows
    rows.setdefault("POST /stop → run.cancelled on the event stream", []).append(
        stamp["cancelled"] - sent
    )
    rows.setdefault("POST /stop → its answer", []).append(answered - sent)
    for name, seconds in floors:
        rows.setdefault(name, []).append(seconds)
    side.upstream.append(None if end is None else end["perf"] - sent)
    side.ends[_how(end, upstream_wait)] += 1
    side.after.append(_content_chunks(peer, since, req, sent))
    side.second_stop[status2] += 1
    side.answers[str(json.loads(body)["status"])] += 1
    side.statuses[str(json.loads(state)["status"])] += 1


def _how(end: Event | None, upstream_wait: float) -> str:
    """How stubllm's stream ended, in words."""
    if end is None:
        return f"still streaming {upstream_wait:g} s after the stop"
    if end["event"] == "stream_completed":
        return "read to its end ([DONE])"
    return {"cancelled": "closed by the client", "closed": "generator closed"}.get(
        str(end.get("how")), str(end.get("how"))
    )


def _cell(samples: list[float | None], limit: float) -> str:
    """median / p90 in ms; a sample of None (not within `limit` s) counts as the largest."""
    ordered = sorted(samples, key=lambda s: float("inf") if s is None else s)
    values = [float("inf") if s is None else s * 1000 for s in ordered]

    def show(ms: float) -> str:
        return f"> {limit:g} s" if ms == float("inf") else f"{ms:.2f}"

    finite = all(s is not None for s in samples)
    median = statistics.median(values) if finite else statistics.median_low(values)
    return f"{show(median)} / {show(p90(values))}"


def side_by_side(sides: list[Side], limit: float) -> str:
    """Markdown: one row per interval, a median / p90 (ms) column per server."""
    head = "| interval (median / p90 ms) | " + " | ".join(s.name for s in sides) + " |"
    lines = [head, "|---|" + "---:|" * len(sides)]

    def row(name: str, cells: list[str]) -> None:
        lines.append(f"| {name} | " + " | ".join(cells) + " |")

    n = [len(s.upstream) for s in sides]
    row("trials", [str(k) for k in n])
    first = "POST /stop → run.cancelled on the event stream"
    row(first, [_cell(list(s.rows[first]), limit) for s in sides])
    row("POST /stop → stubllm's stream ended", [_cell(s.upstream, limit) for s in sides])
    row("how it ended", [", ".join(f"{k} {v}" for k, v in sorted(s.ends.items())) for s in sides])
    row(
        "content chunks stubllm sent after the stop (median / max)",
        [f"{statistics.median_low(s.after)} / {max(s.after)}" for s in sides],
    )
    answer = "POST /stop → its answer"
    row(answer, [_cell(list(s.rows[answer]), limit) for s in sides])
    row("its status", [", ".join(f"{k} {v}" for k, v in s.answers.items()) for s in sides])
    row(
        "the run's status then",
        [", ".join(f"{k} {v}" for k, v in s.statuses.items()) for s in sides],
    )
    row(
        "a second stop of the run",
        [", ".join(f"{k}: {v}" for k, v in sorted(s.second_stop.items())) for s in sides],
    )
    for floor in ("floor: GET /health", "floor: GET /v1/runs/{id}"):
        row(floor, [_cell(list(s.rows[floor]), limit) for s in sides])
    return "\n".join(lines)


async def main(
    trials: int, upstream_wait: float, chunk_delay_ms: int, logs: Path | None
) -> list[Side]:
    async with (
        open_peer("stubllm", "stubllm_server.py", "--chunk-delay-ms", str(chunk_delay_ms)) as peer,
        runs_api(str(peer.ready["base_url"]), BAND_KEY) as band_url,
        hermes_gateway(str(peer.ready["base_url"]), HERMES_KEY, logs) as hermes_url,
    ):
        sides: list[Side] = []
        async with (
            httpx2.AsyncClient(
                base_url=band_url, headers={"authorization": f"Bearer {BAND_KEY}"}, timeout=WAIT
            ) as band_client,
            httpx2.AsyncClient(
                base_url=hermes_url,
                headers={"authorization": f"Bearer {HERMES_KEY}"},
                timeout=WAIT,
            ) as hermes_client,
        ):
            sides = [
                Side("band-trio", band_url, BAND_KEY, band_client),
                Side("Hermes 0.19.0", hermes_url, HERMES_KEY, hermes_client),
            ]
            for side in sides:  # warm-up: imports, connections, the first agent
                await _trial(side, peer, f"warm-up {side.name}", upstream_wait, False)
            for i in range(trials):
                for side in sides if i % 2 == 0 else sides[::-1]:
                    await _trial(side, peer, f"trial {i} {side.name}", upstream_wait, True)
    return sides


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=20, help="trials per server")
    parser.add_argument(
        "--upstream-wait",
        type=float,
        default=20.0,
        help="seconds after the stop to wait for stubllm's stream to end (default 20)",
    )
    parser.add_argument(
        "--chunk-delay-ms", type=int, default=50, help="stubllm's delay between chunks"
    )
    parser.add_argument("--hermes-logs", type=Path, help="copy Hermes' logs here at the end")
    parser.add_argument("--json", action="store_true", help="also print the raw seconds as JSON")
    args = parser.parse_args()
    if args.trials < 1:
        parser.error("--trials must be at least 1")
    hermes = hermes_setup()
    stubllm = importlib.metadata.version("stubllm")
    load = os.getloadavg()
    began = time.time()
    results = trio.run(main, args.trials, args.upstream_wait, args.chunk_delay_ms, args.hermes_logs)
    print(
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(began))}; {args.trials} trials per "
        f"server, alternating; hermes-agent {hermes}, stubllm {stubllm} streaming "
        f"{args.chunk_delay_ms} ms a "
        f"chunk; load average {load[0]:.2f} at the start, {os.getloadavg()[0]:.2f} at the "
        f"end; {time.time() - began:.0f} s\n"
    )
    print(side_by_side(results, args.upstream_wait))
    if args.json:
        raw = {
            s.name: {**s.rows, "upstream": s.upstream, "chunks after the stop": s.after}
            for s in results
        }
        print(json.dumps(raw, indent=1, ensure_ascii=False))
