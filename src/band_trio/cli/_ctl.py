"""`band-trio ctl interrupt|stop|play`: send a control signal through the admin API.

The embedded platform pushes the signal to the agent exactly as the real
platform would (`agent.control` on `agent_control:{agent}`), so this drives a
band-trio agent and a band-sdk agent alike.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

import httpx2
import msgspec

from .. import errors
from ..policy import Policy
from ..wire.admin import AdminControl, ControlAccepted
from ._exits import EXIT_CRASH
from ._ready import read_ready_file

__all__ = ["add_parser"]


def add_parser(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "ctl", help="send interrupt, stop or play to an agent through the admin API"
    )
    parser.add_argument("mode", choices=["interrupt", "stop", "play"])
    parser.add_argument("--room", help="the room to signal (default: every room of the agent)")
    parser.add_argument("--agent", help="the agent (env BAND_AGENT_ID, or the ready file's)")
    parser.add_argument("--reason", help="a reason shown to the agent")
    parser.add_argument("--admin-url", help="the admin API (env BAND_ADMIN_URL)")
    parser.add_argument("--ready-file", type=Path, help="read admin_url and agent_id from here")
    parser.set_defaults(run=_run)


def _settings(args: argparse.Namespace) -> tuple[str, str]:
    ready = read_ready_file(args.ready_file) if args.ready_file is not None else None
    admin_url = (
        args.admin_url or os.environ.get("BAND_ADMIN_URL") or (ready.admin_url if ready else None)
    )
    agent_id = args.agent or os.environ.get("BAND_AGENT_ID") or (ready.agent_id if ready else None)
    if not admin_url:
        raise errors.ConfigurationError("no admin API: pass --admin-url or --ready-file")
    if not agent_id:
        raise errors.ConfigurationError("no agent: pass --agent, --ready-file or BAND_AGENT_ID")
    return str(admin_url).rstrip("/"), str(agent_id)


def _run(args: argparse.Namespace) -> int:
    admin_url, agent_id = _settings(args)
    body = AdminControl(
        agent_id=agent_id,
        mode=args.mode,
        room_id=args.room,
        scope="room" if args.room else "agent",
        reason=args.reason,
    )
    sent = time.perf_counter()
    try:
        response = httpx2.post(
            f"{admin_url}/control",
            content=msgspec.json.encode(body),
            headers={"content-type": "application/json"},  # the admin API takes JSON only
            timeout=Policy().admin_request,
        )
    except httpx2.HTTPError as exc:
        print(f"band-trio ctl: cannot reach {admin_url}: {exc}")
        return EXIT_CRASH
    took = (time.perf_counter() - sent) * 1000
    if response.status_code != 200:
        print(f"band-trio ctl: {response.status_code} {response.text}")
        return EXIT_CRASH
    accepted = msgspec.json.decode(response.content, type=ControlAccepted)
    target = f"room {args.room}" if args.room else "every room"
    print(
        f"{args.mode} sent to agent {agent_id}, {target} "
        f"(correlation {accepted.correlation_id}, {took:.1f} ms)"
    )
    return 0
