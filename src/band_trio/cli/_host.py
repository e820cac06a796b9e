"""`band-trio host --adapter MODULE:FACTORY`: the other end of a bridge.

Serves the bridge's envelopes over HTTP and runs the adapter for each message
as the agent identity given by the flags or `BAND_AGENT_ID`, `BAND_API_KEY`,
`BAND_REST_URL` (or a platform's `--ready-file`): claim, run, settle. A
forward whose request goes away stops its turn. The first SIGINT/SIGTERM
stops gracefully (open turns get `BridgePolicy.health_grace`, then are
cancelled, their messages left `processing`), a second at once (`HostApp.hard_stop`; the
process exits 1 after `Policy.hard_stop_deadline` whatever still runs).

Every forward must carry the host's token (`--token-file` or `BAND_HOST_TOKEN`);
`--insecure-no-token` serves without one, on loopback only, with a warning.
The host listens on loopback unless `--allow-remote` (and a token) is given.
The key is checked at start-up (`GET /me`): a refused key, or one that is another
agent's, exits 3 (as `agent` does).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from .. import errors
from ..link import check_rest_url
from ..policy import Policy
from ..server import MIN_SECRET_LENGTH, check_bind, check_secret, is_loopback, parse_listen
from ._agent import load_adapter, upstream_policy
from ._exits import EXIT_DISCONNECTED, EXIT_OK, single
from ._observe import add_flags as add_observe_flags
from ._observe import observing
from ._ready import read_ready_file
from ._signals import serve_until_signalled

if TYPE_CHECKING:
    from ..host import HostApp

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
    parser.add_argument(
        "--token-file",
        type=Path,
        help="the bearer token every forward must carry (env BAND_HOST_TOKEN; "
        f"≥ {MIN_SECRET_LENGTH} characters)",
    )
    parser.add_argument(
        "--insecure-no-token",
        action="store_true",
        help="serve without a token: any local process can run turns (loopback only)",
    )
    parser.add_argument(
        "--allow-remote",
        action="store_true",
        help="listen on a non-loopback address (needs a token)",
    )
    parser.add_argument("--rest-url", help="REST base URL (env BAND_REST_URL)")
    parser.add_argument("--agent-id", help="the agent's id (env BAND_AGENT_ID)")
    parser.add_argument("--api-key", help="the agent's API key (env BAND_API_KEY)")
    parser.add_argument(
        "--ready-file",
        type=Path,
        help="take what is not given otherwise from a platform's ready file",
    )
    add_observe_flags(parser)
    parser.set_defaults(run=_run)


def _token(args: argparse.Namespace, host: str) -> str | None:
    """The token from `--token-file` or `BAND_HOST_TOKEN`, or None with
    `--insecure-no-token` (loopback only); one line saying why otherwise."""
    token = os.environ.get("BAND_HOST_TOKEN")
    if args.token_file is not None:
        try:
            token = args.token_file.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            raise errors.ConfigurationError(
                f"cannot read the token file {args.token_file}: {why}"
            ) from None
    if args.insecure_no_token:
        if token:
            raise errors.ConfigurationError(
                "--insecure-no-token and a token (--token-file or BAND_HOST_TOKEN): give one"
            )
        if not is_loopback(host):
            raise errors.ConfigurationError(
                f"--insecure-no-token serves loopback only, not {host}: give the host a token"
            )
        return None
    how = "give --token-file FILE or BAND_HOST_TOKEN, or --insecure-no-token on loopback"
    return check_secret(token, what="the host's token", how=how)


def _run(args: argparse.Namespace) -> int:
    seen = observing(args, "host")
    ready = read_ready_file(args.ready_file) if args.ready_file is not None else None
    agent_id = args.agent_id or os.environ.get("BAND_AGENT_ID") or (ready and ready.agent_id)
    api_key = args.api_key or os.environ.get("BAND_API_KEY") or (ready and ready.api_key)
    rest_url = args.rest_url or os.environ.get("BAND_REST_URL") or (ready and ready.rest_url)
    for name, value in (("agent id", agent_id), ("API key", api_key), ("REST URL", rest_url)):
        if not value:
            raise errors.ConfigurationError(f"the host needs the agent's {name}")
    check_rest_url(str(rest_url))
    host, port = parse_listen(args.listen, "--listen")
    check_bind(host, what="the host", allow_remote=args.allow_remote, opt_in="--allow-remote")
    token = _token(args, host)
    if token is None:
        print(
            "band-trio host: WARNING: --insecure-no-token: any process on this machine "
            "can run turns as this agent",
            file=sys.stderr,
            flush=True,
        )
    from ..host import HostApp  # loaded only for this command

    policy = Policy(upstream=upstream_policy())  # BAND_UPSTREAM_*: the adapter's default
    adapter = load_adapter(args.adapter)
    app = HostApp(adapter, agent_id=str(agent_id), token=token, policy=policy)
    try:
        trio.run(seen.wrap(_serve), app, str(api_key), str(rest_url), host, port)
    except BaseException as exc:
        error = single(exc)
        if isinstance(error, errors.AuthenticationError):
            print(f"band-trio host: the platform refused the key: {error}", file=sys.stderr)
            return EXIT_DISCONNECTED
        raise
    return EXIT_OK


async def _serve(app: HostApp, api_key: str, rest_url: str, host: str, port: int) -> None:
    from ..host import serve_host

    stop = trio.Event()

    async def work() -> None:
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

            bound = await nursery.start(serve)
            print(f"band-trio host: serving on http://{host}:{bound}/", file=sys.stderr, flush=True)

    async def graceful() -> None:
        stop.set()

    def running() -> str:
        turns = app.running_turns()
        return (
            "turns " + ", ".join(f"{room}: {message}" for room, message in turns) if turns else ""
        )

    def hard() -> None:
        app.hard_stop("a second signal")
        stop.set()

    await serve_until_signalled(
        "host", work, graceful=graceful, hard=hard, policy=app.policy, still_running=running
    )
