"""The embedded platform's memory under large and many requests (RSS of its process).

    .venv/bin/python benchmarks/platform_memory.py --rounds 20

Starts `band-trio platform` in its own process (state in memory), then:

1. ten 10 MB POSTs to a route that does not exist (no key needed);
2. `--rounds` rounds of 1,000 iterations — a 50 kB post to an unknown route
   and an authenticated `GET /next` each, and every 50th a 1 kB message
   posted through the admin API, claimed and marked `processed` — sampling
   the process's RSS after each round.

The request log is a ring (`PlatformPolicy.log_entries`, bodies cut to
`log_text_limit`) and bodies over `max_request_body` are refused unread, so
once the ring is full the line must stay flat. (Stored messages grow the
in-memory database by what they hold, which is why they are small here.)
"""

from __future__ import annotations

import argparse
import os
import sys

import httpx2
from _platform_process import platform_process


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def main(rounds: int) -> None:
    with platform_process() as (proc, info):
        run(proc.pid, info, rounds)


def run(pid: int, info: dict[str, str], rounds: int) -> None:
    base, admin = info["rest_url"], info["admin_url"]
    room, user, agent = info["room_id"], info["user_id"], info["agent_id"]
    key = {"X-API-Key": info["api_key"]}
    # a body the platform reads says it is JSON (other bodies are refused unread)
    with httpx2.Client(timeout=30, headers={"content-type": "application/json"}) as client:
        client.get(f"{base}/api/v1/agent/me", headers=key)
        print(f"baseline: {rss_mb(pid):.1f} MB")
        big = b"x" * (10 * 1000 * 1000)
        statuses = [
            client.post(f"{base}/no/such/route", content=big).status_code for _ in range(10)
        ]
        print(f"after ten 10 MB posts to an unknown route (answered {set(statuses)}): "
              f"{rss_mb(pid):.1f} MB")  # fmt: skip
        medium = b"y" * 50_000
        message = "z" * 1000
        for round_ in range(1, rounds + 1):
            for i in range(1000):
                client.post(f"{base}/unknown", content=medium)
                client.get(f"{base}/api/v1/agent/chats/{room}/messages/next", headers=key)
                if i % 50 == 0:
                    posted = client.post(
                        f"{admin}/rooms/{room}/messages",
                        json={"sender_id": user, "content": message, "mentions": [agent]},
                    ).json()["id"]
                    mark = f"{base}/api/v1/agent/chats/{room}/messages/{posted}"
                    client.post(f"{mark}/processing", headers=key)
                    client.post(f"{mark}/processed", headers=key)
            stats = client.get(f"{admin}/stats").json()
            print(
                f"round {round_:2d}: {rss_mb(pid):6.1f} MB, log entries {stats['log_entries']}, "
                f"evicted {stats.get('log_evicted', 'n/a')}"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    if not os.path.exists("/proc/self/status"):
        sys.exit("needs /proc (Linux)")
    main(args.rounds)
