"""The `band-trio` command: `platform`, `agent`, `demo`, `ctl`, `conformance`, `bench`,
`runs-api`, `bridge` and `host` (docs/reference/cli.md).

This is the one boundary where an error becomes an exit status (`_exits`): a
`ConfigurationError` is one line and 2, a refused key 3, a platform that cannot
be reached or answers wrongly one line and 1. Anything else is a bug, and
Python's traceback says where.
"""

from __future__ import annotations

import argparse
import logging
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
from ._exits import EXIT_STATUSES, single

__all__ = [
    "EXIT_CONFIG",
    "EXIT_CRASH",
    "EXIT_DISCONNECTED",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
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
