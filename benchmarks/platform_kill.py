"""The platform dies or freezes while an agent answers: is every message answered once?

    .venv/bin/python benchmarks/platform_kill.py --messages 16000 --kills 50
    .venv/bin/python benchmarks/platform_kill.py --messages 400 --freeze 30 --freezes 2

Real processes, as an operator runs them: `band-trio platform --db` (restarted on the
same port and file after each `kill -9`, as a supervisor would) and `band-trio agent`
(the demo adapter: it answers `echo: <text>` after `sleep=` in the text). Messages are
posted through the admin API across `--rooms` rooms at a steady pace, while the
platform is killed `--kills` times at random moments (or frozen with SIGSTOP for
`--freeze` seconds, `--freezes` times). Then every message must end `processed` with
exactly one answer; the agent is restarted, and after `--settle` seconds nothing may
have changed (no answer twice, no status moved). One line of results; exit 1 on any
violation. Every process started is stopped by its PID.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx2

BAND_TRIO = [sys.executable, "-m", "band_trio"]


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Run:
    def __init__(self, folder: Path, args: argparse.Namespace) -> None:
        self.folder = folder
        self.args = args
        self.port = free_port()
        self.db = folder / "band.db"
        self.ready = folder / "ready.json"
        self.platform: subprocess.Popen[bytes] | None = None
        self.agent: subprocess.Popen[bytes] | None = None
        self.info: dict[str, Any] = {}
        self.client = httpx2.Client(timeout=10)

    # -- processes ---------------------------------------------------------------

    def start_platform(self, *, seed: bool) -> None:
        self.ready.unlink(missing_ok=True)
        argv = [*BAND_TRIO, "platform", "--db", str(self.db), "--port", str(self.port)]
        argv += ["--ready-file", str(self.ready), *(["--seed"] if seed else [])]
        log = (self.folder / "platform.log").open("ab")
        self.platform = subprocess.Popen(argv, stdout=log, stderr=log)
        deadline = time.monotonic() + 30
        while not self.ready.exists():
            if self.platform.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the platform did not start (see platform.log)")
            time.sleep(0.02)
        if seed:
            self.info = json.loads(self.ready.read_text())

    def start_agent(self) -> None:
        """The agent, its settings in the environment (the ready file goes at a kill);
        returns once it is connected."""
        log = (self.folder / "agent.log").open("ab")
        info = self.info
        env = {
            **os.environ, "BAND_REST_URL": info["rest_url"], "BAND_WS_URL": info["ws_url"],
            "BAND_AGENT_ID": info["agent_id"], "BAND_API_KEY": info["api_key"],
        }  # fmt: skip
        opened = self.admin("GET", "/stats")["connections_opened"]
        argv = [*BAND_TRIO, "--log-level", self.args.agent_log, "agent"]
        self.agent = subprocess.Popen(argv, stdout=log, stderr=log, env=env)
        while self.admin("GET", "/stats")["connections_opened"] == opened:
            if self.agent.poll() is not None:
                raise SystemExit("the agent exited at start-up (see agent.log)")
            time.sleep(0.05)

    def stop(self, process: subprocess.Popen[bytes] | None, sig: int = signal.SIGTERM) -> None:
        if process is None or process.poll() is not None:
            return
        os.kill(process.pid, signal.SIGCONT)
        os.kill(process.pid, sig)
        try:
            process.wait(timeout=40)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    # -- the admin API (with the platform away, it waits for it) -----------------------

    def admin(self, method: str, path: str, **kwargs: Any) -> Any:
        for _ in range(3000):
            try:
                answer = self.client.request(method, self.info["admin_url"] + path, **kwargs)
            except httpx2.TransportError:
                time.sleep(0.02)
                continue
            answer.raise_for_status()
            return answer.json()
        raise SystemExit(f"the admin API did not answer {method} {path}")


def main(args: argparse.Namespace) -> int:
    rng = random.Random(args.seed)
    directory = tempfile.mkdtemp(prefix="band-trio-kill-")
    run = Run(Path(directory), args)
    try:
        return drive(run, args, rng)
    finally:
        run.stop(run.agent)
        run.stop(run.platform, signal.SIGKILL)
        run.client.close()
        if args.keep:
            print(f"logs in {directory}", file=sys.stderr)
        else:
            shutil.rmtree(directory, ignore_errors=True)


def drive(run: Run, args: argparse.Namespace, rng: random.Random) -> int:
    started = time.monotonic()
    run.start_platform(seed=True)
    agent_id, user = run.info["agent_id"], run.info["user_id"]
    rooms = [run.info["room_id"]]
    for n in range(args.rooms - 1):
        body = {"title": f"room {n}", "participants": [user, agent_id]}
        rooms.append(run.admin("POST", "/rooms", json=body)["id"])
    run.start_agent()
    faults = args.kills if not args.freeze else args.freezes
    fault_at = sorted(rng.sample(range(1, args.messages), min(faults, args.messages - 1)))
    posted: dict[str, tuple[str, str]] = {}
    for n in range(args.messages):
        if fault_at and n == fault_at[0]:
            fault_at.pop(0)
            time.sleep(rng.uniform(0, 0.05))  # a random moment of the agent's work
            assert run.platform is not None
            if args.freeze:
                os.kill(run.platform.pid, signal.SIGSTOP)
                time.sleep(args.freeze)
                os.kill(run.platform.pid, signal.SIGCONT)
            else:
                run.platform.kill()
                run.platform.wait()
                run.start_platform(seed=False)
        room = rooms[n % len(rooms)]
        content = f"m{n} sleep=0.0{rng.randint(0, 3)}"
        created = run.admin(
            "POST", f"/rooms/{room}/messages", json={"sender_id": user, "content": content}
        )
        posted[created["id"]] = (room, content)
        if args.pace:
            time.sleep(args.pace)
    settled = wait_settled(run, posted, args.deadline)
    first = tally(run, rooms, posted)
    # an agent restart must change nothing
    run.stop(run.agent)
    run.start_agent()
    time.sleep(args.settle)
    second = tally(run, rooms, posted)
    elapsed = time.monotonic() - started
    violations = list(first["violations"])
    if first["statuses"] != second["statuses"]:
        violations.append(
            f"the restart changed the statuses: {dict(first['statuses'])} -> "
            f"{dict(second['statuses'])}"
        )
    more = {k: n - first["answers"].get(k, 0) for k, n in second["answers"].items()}
    if any(more.values()):
        again = sorted(k for k, n in more.items() if n)
        violations.append(f"the restart answered {len(again)} again: {', '.join(again[:5])}")
    kind = f"{args.freezes} freezes of {args.freeze:g} s" if args.freeze else f"{args.kills} kills"
    print(
        f"{args.messages} messages, {args.rooms} rooms, {kind}: settled={settled} "
        f"statuses={dict(first['statuses'])} answered twice={first['twice']} "
        f"unanswered={first['unanswered']} "
        f"after an agent restart: {'unchanged' if first == second else 'CHANGED'}; "
        f"{elapsed:.0f} s",
        flush=True,
    )
    for violation in violations[:20]:
        print("  ", violation)
    return 1 if violations or not settled else 0


def wait_settled(run: Run, posted: dict[str, tuple[str, str]], deadline: float) -> bool:
    agent_id = run.info["agent_id"]
    pending = list(posted)
    end = time.monotonic() + deadline
    while pending and time.monotonic() < end:
        found = run.admin("GET", f"/messages/{pending[0]}")["delivery"].get(agent_id, {})
        if found.get("status") in ("processed", "failed"):
            pending.pop(0)
        else:
            print(f"  waiting: {len(pending)} not settled", file=sys.stderr, flush=True)
            time.sleep(0.5)
    return not pending


def tally(run: Run, rooms: list[str], posted: dict[str, tuple[str, str]]) -> dict[str, Any]:
    agent_id = run.info["agent_id"]
    answers: Counter[str] = Counter()
    for room in rooms:
        for message in run.admin("GET", f"/rooms/{room}/messages"):
            if message["sender_id"] == agent_id:
                answers[message["content"]] += 1
    statuses: Counter[str] = Counter()
    violations = []
    for message_id, (_, content) in posted.items():
        status = run.admin("GET", f"/messages/{message_id}")["delivery"][agent_id]["status"]
        statuses[status] += 1
        count = answers[f"echo: {content}"]
        if count != 1 or status != "processed":
            violations.append(f"{message_id} ({content}): {status}, answered {count} times")
    return {
        "answers": dict(answers),
        "statuses": statuses,
        "twice": sum(1 for c in answers.values() if c > 1),
        "unanswered": sum(1 for _, c in posted.values() if answers[f"echo: {c}"] == 0),
        "violations": violations,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--rooms", type=int, default=20)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--freeze", type=float, default=0.0, help="SIGSTOP this long instead")
    parser.add_argument("--freezes", type=int, default=2)
    parser.add_argument("--pace", type=float, default=0.0, help="seconds between two posts")
    parser.add_argument("--deadline", type=float, default=600.0)
    parser.add_argument("--settle", type=float, default=5.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", action="store_true", help="keep the logs' folder")
    parser.add_argument("--agent-log", default="WARNING", help="the agent's --log-level")
    sys.exit(main(parser.parse_args()))
