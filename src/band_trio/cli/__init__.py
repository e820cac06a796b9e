"""The `band-trio` command: `platform`, `agent`, `demo`, `ctl`, `conformance`, `bench`,
`runs-api`, `bridge` and `host` (docs/reference/cli.md).

This is the one boundary where an error becomes an exit status (`_exits`): a
`ConfigurationError` is one line and 2, a refused key 3, a platform that cannot
be reached or answers wrongly one line and 1, a reader of stdout gone (`| head`)
nothing and 141. Anything else is a bug, and Python's traceback says where.
"""

from __future__ import annotations

import argparse
import logging
import os
import select
import sys
from collections.abc import Sequence

from .. import __version__, errors, observe
from . import _agent, _bench, _bridge, _conformance, _ctl, _demo, _host, _platform, _runs_api
from ._exits import EXIT_CONFIG as EXIT_CONFIG
from ._exits import EXIT_CRASH as EXIT_CRASH
from ._exits import EXIT_DISCONNECTED as EXIT_DISCONNECTED
from ._exits import EXIT_FAILED as EXIT_FAILED
from ._exits import EXIT_INTERRUPTED as EXIT_INTERRUPTED
from ._exits import EXIT_OK as EXIT_OK
from ._exits import EXIT_PIPE as EXIT_PIPE
from ._exits import EXIT_STATUSES, single

__all__ = [
    "EXIT_CONFIG",
    "EXIT_CRASH",
    "EXIT_DISCONNECTED",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_PIPE",
    "main",
]

_DESCRIPTION = """\
band-trio: a trio agent runtime for the Band platform, where stopping work is
structural. The embedded platform, agents, the conformance kit, the benchmark,
the runs API, the bridge and its host; `band-trio COMMAND --help` for each."""


def _log_level(value: str) -> str:
    level = value.upper()
    if level not in logging.getLevelNamesMapping():
        names = ", ".join(n for n in logging.getLevelNamesMapping() if n != "NOTSET")
        raise argparse.ArgumentTypeError(f"unknown level {value!r} (one of {names})")
    return level


class _Formatter(argparse.HelpFormatter):
    """argparse's wrapping, except for the exit-status table, which is laid out already."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text == EXIT_STATUSES:
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="band-trio",
        description=_DESCRIPTION,
        epilog=EXIT_STATUSES,
        formatter_class=_Formatter,
    )
    parser.add_argument("--version", action="version", version=f"band-trio {__version__}")
    parser.add_argument(
        "--log-level", default="WARNING", type=_log_level, help="logging level (default: WARNING)"
    )
    parser.add_argument(
        "--log-format",
        default="text",
        choices=["text", "json"],
        help="text (the default) or json: one object a line with time, level, logger, "
        "message, and the room, message id and correlation id where known",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _platform.add_parser(commands)
    _agent.add_parser(commands)
    _demo.add_parser(commands)
    _ctl.add_parser(commands)
    _conformance.add_parser(commands)
    _bench.add_parser(commands)
    _runs_api.add_parser(commands)
    _bridge.add_parser(commands)
    _host.add_parser(commands)
    helps = {action.dest: action.help for action in commands._choices_actions}
    for name, command in commands.choices.items():  # each command's --help: what, and exits
        summary = helps.get(name)
        if command.description is None and summary:
            command.description = f"{summary[:1].upper()}{summary[1:]}."
        if command.epilog is None:
            command.epilog = EXIT_STATUSES
            command.formatter_class = _Formatter
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """`band-trio ARGV`: the exit status (docs/reference/cli.md, "Exit statuses").

    A reader of stdout that goes away (`band-trio demo | head -3`) ends the command
    quietly with `EXIT_PIPE`, as a tool killed by SIGPIPE would: Python ignores the
    signal, so the write raises `BrokenPipeError` wherever it happens (often inside
    a nursery). The last of the output is flushed here, while the error can still
    be caught, and stdout is pointed at /dev/null so the interpreter's own flush
    at exit finds nothing to complain about. Only a broken *stdout* is quiet: a
    `BrokenPipeError` from anything else is a bug and keeps its traceback."""
    try:
        try:
            code = _main(argv)
        except SystemExit:  # argparse's --help and usage errors: their text may be buffered
            sys.stdout.flush()
            if _stdout_gone():  # argparse swallows the error of its own write
                return EXIT_PIPE
            raise
        sys.stdout.flush()
    except BaseException as exc:
        if not (isinstance(single(exc), BrokenPipeError) and _stdout_gone()):
            raise
        return EXIT_PIPE
    return code


def _stdout_gone() -> bool:
    """stdout is a pipe whose reader has gone (POLLERR on its write end); if so it is
    pointed at /dev/null, so nothing more is written to the closed pipe."""
    try:
        fd = sys.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        gone = any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):  # no real stdout (closed, replaced)
        return False
    if gone:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
    return gone


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    observe.configure_logging(args.log_level, args.log_format)
    try:
        code: int = args.run(args)
    except BaseException as exc:  # the boundary: an error a user can act on is one line
        error = single(exc)
        if isinstance(error, errors.ConfigurationError):
            print(f"band-trio: {error}", file=sys.stderr)
            return EXIT_CONFIG
        if isinstance(error, errors.AuthenticationError):
            refused = f"band-trio {args.command}: the platform refused the key: {error}"
            print(refused, file=sys.stderr)
            return EXIT_DISCONNECTED
        if isinstance(error, errors.PlatformError):
            print(f"band-trio {args.command}: {error}", file=sys.stderr)
            return EXIT_FAILED
        if isinstance(error, KeyboardInterrupt):  # Ctrl-C where no command serves SIGINT
            print("band-trio: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED
        raise
    return code


if __name__ == "__main__":
    sys.exit(main())
