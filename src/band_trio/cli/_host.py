"""`band-trio host --adapter MODULE:FACTORY`: the other end of a bridge.

Serves the bridge's envelopes over HTTP and runs the adapter for each message
as the agent identity given by the flags or `BAND_AGENT_ID`, `BAND_API_KEY`,
`BAND_REST_URL` (or a platform's `--ready-file`): claim, run, settle. A
forward whose request goes away stops its turn. The first SIGINT/SIGTERM
stops gracefully (open turns get `BridgePolicy.health_grace`, then are
cancelled, their messages left `processing`), a second at once.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from .. import errors
from ..policy import Policy
from ._agent import load_adapter, upstream_policy
from ._exits import EXIT_OK
from ._ready import read_ready_file

if TYPE_CHECKING:
    from ..bridge import HostApp

__all__ = ["add_parser"]


def add_parser(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "host", help="run an adapter behind a bridge: serve its envelopes over HTTP"
    )
    parser.add_argument(
        "--adapter", metavar="MODULE:FACTORY", required=True, help="a callable returning an Adapter"
    )
    parser.add_argument(
        "--listen", default="127.0.0.1:8800", metavar="HOST:PORT", help="default 127.0.0.1:8800"
    )
    parser.add_argument("--rest-url", help="REST base URL (env BAND_REST_URL)")
    parser.add_argument("--agent-id", help="the agent's id (env BAND_AGENT_ID)")
    parser.add_argument("--api-key", help="the agent's API key (env BAND_API_KEY)")
    parser.add_argument(
        "--ready-file",
        type=Path,
        help="take what is not given otherwise from a platform's ready file",
    )
    parser.set_defaults(run=_run)


def _listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise errors.ConfigurationError(f"--listen must be HOST:PORT, not {value!r}")
    return host, int(port)


def _run(args: argparse.Namespace) -> int:
    ready = read_ready_file(args.ready_file) if args.ready_file is not None else None
    agent_id = args.agent_id or os.environ.get("BAND_AGENT_ID") or (ready and ready.agent_id)
    api_key = args.api_key or os.environ.get("BAND_API_KEY") or (ready and ready.api_key)
    rest_url = args.rest_url or os.environ.get("BAND_REST_URL") or (ready and ready.rest_url)
    for name, value in (("agent id", agent_id), ("API key", api_key), ("REST URL", rest_url)):
        if not value:
            raise errors.ConfigurationError(f"the host needs the agent's {name}")
    host, port = _listen(args.listen)
    from ..bridge import HostApp  # loaded only for this command

    policy = Policy(upstream=upstream_policy())  # BAND_UPSTREAM_*: the adapter's default
    app = HostApp(load_adapter(args.adapter), agent_id=str(agent_id), policy=policy)
    trio.run(_serve, app, str(api_key), str(rest_url), host, port)
    return EXIT_OK


async def _serve(app: HostApp, api_key: str, rest_url: str, host: str, port: int) -> None:
    from ..bridge import serve_host

    stop = trio.Event()
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:

            async def serve(*, task_status: trio.TaskStatus[int]) -> None:
                await serve_host(
                    app,
                    api_key=api_key,
                    rest_url=rest_url,
                    host=host,
                    port=port,
                    stop=stop,
                    task_status=task_status,
                )
                nursery.cancel_scope.cancel(reason="the host stopped")

            nursery.start_soon(_on_signals, signals, stop, nursery.cancel_scope)
            bound = await nursery.start(serve)
            print(f"band-trio host: serving on http://{host}:{bound}/", file=sys.stderr, flush=True)


async def _on_signals(signals: Any, stop: trio.Event, hard_stop: trio.CancelScope) -> None:
    async for signum in signals:
        name = signal.Signals(signum).name
        print(f"band-trio host: {name}: stopping (again to force)", file=sys.stderr, flush=True)
        stop.set()
        break
    else:
        return
    async for _ in signals:
        hard_stop.cancel(reason="second signal")
        return
