"""`band-trio ctl interrupt|stop|play`: send a control signal through the admin API.

The embedded platform pushes the signal to the agent exactly as the real
platform would (`agent.control` on `agent_control:{agent}`), so this drives a
band-trio agent and a band-sdk agent alike.

Exit 0 once the platform accepted the signal; 2 for a malformed URL or a signal it
refuses (an unknown agent or room: its words, one line); 1 for an admin API that
cannot be reached or answers something else. Every error is one line on stderr.

An agent with no socket open is told apart (the platform's answer says so): an
interrupt then reached no one — nothing runs to interrupt, and nothing keeps it —
so it exits 1 (a peer that could not be reached); a stop or a play is still the
platform's gate, which outlives the agent, so it exits 0 with one line on stderr
saying what the next agent to connect will find.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Any

import httpx2
import msgspec
import trio

from .. import errors
from ..contract import read_body
from ..policy import Policy
from ..tls import shared_ssl_context
from ..wire import ErrorEnvelope
from ..wire.admin import AdminControl, ControlAccepted
from ._exits import EXIT_CONFIG, EXIT_FAILED, EXIT_OK
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
    parts = urllib.parse.urlsplit(str(admin_url))
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise errors.ConfigurationError(
            f"the admin API's URL must be http(s)://HOST[:PORT]/_admin, not {admin_url!r}"
        )
    return str(admin_url).rstrip("/"), str(agent_id)


class _Refused(Exception):
    """The admin API refused the signal: the request named something it does not know."""


async def _post(url: str, body: bytes, policy: Policy) -> ControlAccepted:
    """POST one signal, under `Policy.admin_request` for the whole call and a bounded read;
    a `PlatformError` (exit 1) or `_Refused` (exit 2) for anything but an acceptance."""
    limit = policy.max_response_body
    try:
        with trio.fail_after(policy.admin_request):
            async with (
                httpx2.AsyncClient(
                    timeout=policy.admin_request, verify=shared_ssl_context()
                ) as client,
                client.stream(
                    "POST", url, content=body, headers={"content-type": "application/json"}
                ) as response,
            ):
                answer = await read_body(response, limit, what=f"the answer of {url}")
    except trio.TooSlowError:
        raise errors.PlatformUnavailableError(
            f"{url} did not answer within {policy.admin_request:g} s"
        ) from None
    except httpx2.HTTPError as exc:
        raise errors.PlatformUnavailableError(f"cannot reach {url}: {exc}") from None
    except errors.PeerProtocolError as exc:
        raise errors.PlatformProtocolError(str(exc)) from None
    if response.status_code == 200:
        try:
            return msgspec.json.decode(answer, type=ControlAccepted)
        except (msgspec.DecodeError, RecursionError):
            pass
        raise errors.PlatformProtocolError(
            f"{url} answered 200 with something other than the admin API's answer "
            f"(is it the embedded platform's /_admin?): {_head(answer)}"
        )
    try:
        error = msgspec.json.decode(answer, type=ErrorEnvelope).error
    except (msgspec.DecodeError, RecursionError):
        raise errors.PlatformProtocolError(
            f"{url} answered {response.status_code}: {_head(answer)}"
        ) from None
    if 400 <= response.status_code < 500:
        raise _Refused(f"{error.message} ({response.status_code} {error.code})")
    raise errors.PlatformResponseError(
        response.status_code, f"{error.message} (from {url})", code=error.code
    )


def _head(answer: bytes) -> str:
    text = answer[:200].decode("utf-8", "replace")
    return repr(text) + (" ..." if len(answer) > 200 else "")


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
        accepted = trio.run(_post, f"{admin_url}/control", msgspec.json.encode(body), Policy())
    except _Refused as exc:
        print(f"band-trio ctl: refused: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    took = (time.perf_counter() - sent) * 1000
    target = f"room {args.room}" if args.room else "every room"
    if accepted.connected is False and args.mode == "interrupt":
        print(
            f"band-trio ctl: no agent connected: the interrupt reached no one (agent "
            f"{agent_id} has no socket open; nothing was running to interrupt)",
            file=sys.stderr,
        )
        return EXIT_FAILED
    print(
        f"{args.mode} sent to agent {agent_id}, {target} "
        f"(correlation {accepted.correlation_id}, {took:.1f} ms)"
    )
    if accepted.connected is False:
        print(f"band-trio ctl: no agent connected: {_held(args.mode, target)}", file=sys.stderr)
    return EXIT_OK


def _held(mode: str, target: str) -> str:
    """What a stop or play sent to no socket becomes: the platform's gate, which the
    next agent to connect meets (a stop answers nothing until a play)."""
    if mode == "stop":
        return (
            f"the platform holds {target} stopped: the agent answers nothing there when it "
            "connects, until `band-trio ctl play`"
        )
    gate = "every room's gate" if target == "every room" else f"the gate of {target}"
    return f"the platform opened {gate}: the agent answers there when it connects"
