"""The `band-trio` argument parser: every command's flags, and the exit-status table.

Imported by `main` when it runs, not with the package: the command modules load
trio, httpx2 and the runtime (~0.3 s), and a Ctrl-C during that must reach `main`'s
handler, not the console script's top level (`band_trio.cli`).
"""

from __future__ import annotations

import argparse
import logging

from .. import __version__
from . import _agent, _bench, _bridge, _conformance, _ctl, _demo, _host, _platform, _runs_api
from ._exits import EXIT_STATUSES

__all__ = ["build_parser"]

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
    parser.set_defaults(log_level="WARNING", log_format="text")
    _add_logging_flags(parser)
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
        _add_logging_flags(command)
    return parser


def _add_logging_flags(parser: argparse.ArgumentParser) -> None:
    """`--log-level` and `--log-format`, on the top-level parser and on every command's:
    people type them after the command name too. No default of their own (`SUPPRESS`):
    a command's parser that set one would overwrite the value given before the command.
    Given on both sides, the one after the command wins, being the later on the line."""
    parser.add_argument(
        "--log-level",
        default=argparse.SUPPRESS,
        type=_log_level,
        help="logging level (default: WARNING)",
    )
    parser.add_argument(
        "--log-format",
        default=argparse.SUPPRESS,
        choices=["text", "json"],
        help="text (the default) or json: one object a line with time, level, logger, "
        "message, and the room, message id and correlation id where known",
    )
