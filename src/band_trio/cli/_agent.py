"""`band-trio agent`: run an agent against any Band platform.

SIGINT or SIGTERM stops it gracefully (running turns get the shutdown grace);
a second signal stops it at once (`Agent.hard_stop`: within `Policy.hard_stop_grace`,
and the process exits 1 after `Policy.hard_stop_deadline` whatever still runs).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from .. import errors
from .._ranges import HOUR, read_number, seconds
from ..adapters import DemoAdapter
from ..contract import Adapter, upstream_from_env
from ..policy import Policy, UpstreamPolicy, WhileBusy
from ..runtime import Agent
from ._collector import collect_rarely, freeze_for_exit
from ._exits import EXIT_CONFIG, EXIT_DISCONNECTED, EXIT_FAILED, single
from ._observe import add_flags as add_observe_flags
from ._observe import observing
from ._ready import read_ready_file, unreachable_hint
from ._signals import serve_until_signalled as signalled

__all__ = ["add_parser", "load_adapter", "serve_until_signalled", "upstream_policy"]

log = logging.getLogger("band_trio.cli")


def add_parser(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "agent", help="run an agent (settings from flags or BAND_* environment variables)"
    )
    parser.add_argument(
        "--adapter",
        metavar="MODULE:FACTORY",
        help="a callable returning an Adapter (default: the built-in demo adapter)",
    )
    parser.add_argument("--rest-url", help="REST base URL (env BAND_REST_URL)")
    parser.add_argument("--ws-url", help="websocket URL (env BAND_WS_URL)")
    parser.add_argument("--agent-id", help="the agent's id (env BAND_AGENT_ID)")
    parser.add_argument("--api-key", help="the agent's API key (env BAND_API_KEY)")
    parser.add_argument(
        "--ready-file",
        type=Path,
        help="take the URLs, agent id and key not given otherwise from a platform's ready file",
    )
    parser.add_argument(
        "--while-busy",
        choices=[strategy.value for strategy in WhileBusy],
        help="what a room does with a message that arrives while a turn runs "
        "(env BAND_WHILE_BUSY; default enqueue)",
    )
    parser.add_argument(
        "--shutdown-grace",
        metavar="SECONDS",
        help="how long running turns may finish after SIGTERM before they are cancelled "
        "(env BAND_SHUTDOWN_GRACE; default 30)",
    )
    parser.add_argument(
        "--reject-conflict",
        action="store_true",
        help="refuse to start if this agent is already connected (instead of superseding it)",
    )
    add_observe_flags(parser)
    parser.set_defaults(run=_run)


def load_callable(spec: str, what: str = "") -> Callable[..., Any]:
    """The callable named by `MODULE:NAME`; MODULE is imported from the current folder
    or the installed packages. A clear `ConfigurationError` otherwise."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise errors.ConfigurationError(f"expected MODULE:NAME, got {spec!r}")
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:  # a console script's path lacks it
        sys.path.insert(0, here)  # MODULE may be a file in the current folder
    try:
        found = getattr(importlib.import_module(module_name), attr)
    except Exception as exc:  # ImportError, AttributeError, or the module's own error
        named = f"{what} {spec!r}" if what else repr(spec)
        raise errors.ConfigurationError(f"cannot load {named}: {exc!r}") from exc
    if not callable(found):
        raise errors.ConfigurationError(f"{spec} is {found!r}, not a callable")
    return found  # type: ignore[no-any-return]


def load_adapter(spec: str | None, *, what: str = "--adapter") -> Adapter:
    """Build the adapter named by `MODULE:FACTORY` (the demo adapter if None); `what`
    names where the spec came from in an error (the flag, or conformance's argument)."""
    if spec is None:
        return DemoAdapter()
    if ":" not in spec:
        hint = f" (for example {spec}:NAME)" if spec and not spec.startswith("-") else ""
        raise errors.ConfigurationError(f"{what} must be MODULE:FACTORY, got {spec!r}{hint}")
    try:
        factory = load_callable(spec)
    except errors.ConfigurationError as exc:
        raise errors.ConfigurationError(
            str(exc).replace("cannot load ", "cannot load adapter ")
        ) from None
    try:
        adapter = factory()
    except errors.ConfigurationError:
        raise  # the factory's own words are the clearest (a missing BAND_* setting)
    except Exception as exc:
        raise errors.ConfigurationError(f"{spec}() raised {exc!r}") from exc
    if not isinstance(adapter, Adapter):
        raise errors.ConfigurationError(f"{spec}() returned {adapter!r}, not an Adapter")
    return adapter


def _run(args: argparse.Namespace) -> int:
    seen = observing(args, "agent")
    ready = read_ready_file(args.ready_file) if args.ready_file is not None else None
    settings = {
        "agent_id": (args.agent_id, "BAND_AGENT_ID", ready.agent_id if ready else None),
        "api_key": (args.api_key, "BAND_API_KEY", ready.api_key if ready else None),
        "rest_url": (args.rest_url, "BAND_REST_URL", ready.rest_url if ready else None),
        "ws_url": (args.ws_url, "BAND_WS_URL", ready.ws_url if ready else None),
    }
    chosen = {
        name: flag or os.environ.get(env) or from_file
        for name, (flag, env, from_file) in settings.items()
    }
    _check_given(chosen)
    agent = Agent(
        load_adapter(args.adapter),
        agent_id=chosen["agent_id"] or "",
        api_key=chosen["api_key"] or "",
        rest_url=chosen["rest_url"] or "",
        ws_url=chosen["ws_url"] or "",
        policy=Policy(
            shutdown_grace=_shutdown_grace(args.shutdown_grace), upstream=upstream_policy()
        ),
        while_busy=_while_busy(args.while_busy),
        reject_conflict=args.reject_conflict,
    )
    collect_rarely(agent.policy.collector_threshold)  # the adapter's modules are loaded
    try:
        try:
            trio.run(seen.wrap(serve_until_signalled), agent)
        finally:
            freeze_for_exit()  # the interpreter's last collection need not walk the rooms
    except BaseException as exc:  # the boundary: decide the exit status, or re-raise
        error = single(exc)
        if isinstance(error, errors.AgentDisconnectedError):
            reason = error.reason
            print(
                f"band-trio agent: disconnected for good: {reason.reason}: {reason.message}",
                file=sys.stderr,
            )
            return EXIT_DISCONNECTED
        if isinstance(error, errors.AuthenticationError):
            print(f"band-trio agent: the platform refused the key: {error}", file=sys.stderr)
            return EXIT_DISCONNECTED
        if isinstance(error, errors.AdapterError):
            print(f"band-trio agent: {error}", file=sys.stderr)
            return EXIT_CONFIG
        if isinstance(error, errors.PlatformUnavailableError):
            from_file = ready is not None and agent.rest_url == ready.rest_url
            hint = unreachable_hint(args.ready_file if from_file else None)
            print(
                f"band-trio agent: cannot reach the platform at {agent.rest_url}: {error}{hint}",
                file=sys.stderr,
            )
            return EXIT_FAILED
        if isinstance(error, errors.PlatformError):
            print(f"band-trio agent: {error}", file=sys.stderr)
            return EXIT_FAILED
        raise
    return 0


_SETTINGS = {
    "agent_id": ("agent id", "--agent-id", "BAND_AGENT_ID"),
    "api_key": ("API key", "--api-key", "BAND_API_KEY"),
    "rest_url": ("REST URL", "--rest-url", "BAND_REST_URL"),
    "ws_url": ("websocket URL", "--ws-url", "BAND_WS_URL"),
}


def _check_given(chosen: dict[str, str | None]) -> None:
    """A missing setting is one line naming its flag, its variable and the ready file."""
    missing = [_SETTINGS[name] for name, value in chosen.items() if not value]
    if not missing:
        return
    what = ", ".join(label for label, _, _ in missing)
    where = "; ".join(f"{flag} or {variable}" for _, flag, variable in missing)
    raise errors.ConfigurationError(
        f"agent: no {what}: give {where}, or --ready-file F for all of them"
        " (the file `band-trio platform --ready-file F` writes)"
    )


def upstream_policy() -> UpstreamPolicy:
    """`Policy.upstream` from `BAND_UPSTREAM_<FIELD>` (`BAND_UPSTREAM_ATTEMPTS=5`,
    `BAND_UPSTREAM_READ_TIMEOUT=120`, …): the retries, timeouts and read limits of every
    adapter without settings of its own."""
    return upstream_from_env(os.environ, "BAND_UPSTREAM_") or UpstreamPolicy()


SHUTDOWN_GRACE = seconds(HOUR)
"""What `--shutdown-grace` (`BAND_SHUTDOWN_GRACE`) may be: a stop that waits longer
for its turns is no stop."""


def _shutdown_grace(flag: str | None) -> float:
    value = flag or os.environ.get("BAND_SHUTDOWN_GRACE")
    if value is None:
        return Policy().shutdown_grace
    return read_number("--shutdown-grace (BAND_SHUTDOWN_GRACE)", value, SHUTDOWN_GRACE)


def _while_busy(flag: str | None) -> WhileBusy:
    value = flag or os.environ.get("BAND_WHILE_BUSY") or WhileBusy.ENQUEUE.value
    try:
        return WhileBusy(value)
    except ValueError:
        choices = ", ".join(strategy.value for strategy in WhileBusy)
        raise errors.ConfigurationError(
            f"BAND_WHILE_BUSY must be one of {choices}, got {value!r}"
        ) from None


async def serve_until_signalled(agent: Agent) -> None:
    """Run `agent`; the first SIGINT/SIGTERM stops it gracefully, a second at once."""

    async def work() -> None:
        await agent.run()
        result = await agent.stop()  # the run's own result, now that it has returned
        if not result.graceful and result.cancelled:
            print(
                f"band-trio agent: cancelled {len(result.cancelled)} running turn(s)",
                file=sys.stderr,
            )

    def running() -> str:
        turns = [f"{room}: {view.running}" for room, view in agent.rooms.items() if view.running]
        return "turns " + ", ".join(turns) if turns else ""

    await signalled(
        "agent",
        work,
        graceful=agent.stop,
        hard=lambda: agent.hard_stop("a second signal"),
        policy=agent.policy,
        still_running=running,
    )
