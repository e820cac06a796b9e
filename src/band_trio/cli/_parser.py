"""The `band-trio` argument parser: every command's flags, and the exit-status table.

Imported by `main` when it runs, not with the package (a Ctrl-C while it loads must
reach `main`'s handler). It imports no command: the top-level parser knows each
command by its name and summary (`SUMMARIES`) alone, so `band-trio --version` and
`--help` cost about an interpreter start. A command's module — and trio, httpx2, the
runtime it brings (~0.3 s) — is imported when that command's parser first parses,
which is when that command is the one run (or its `--help` is asked for).
"""

from __future__ import annotations

import argparse
import importlib

from .. import __version__
from ._exits import EXIT_STATUSES

TYPE_CHECKING = False  # not `typing`'s: see the module's docstring
if TYPE_CHECKING:
    from typing import Any

__all__ = ["COMMANDS", "SUMMARIES", "build_parser"]

_DESCRIPTION = """\
band-trio: a trio agent runtime for the Band platform, where stopping work is
structural. The embedded platform, agents, the conformance kit, the benchmark,
the runs API, the bridge and its host; `band-trio COMMAND --help` for each."""

SUMMARIES: dict[str, str] = {
    "platform": "run the embedded Band platform (REST + websocket + admin API)",
    "agent": "run an agent (settings from flags or BAND_* environment variables)",
    "demo": "run the embedded platform and a demo agent, and show turns and signals",
    "ctl": "send interrupt, stop or play to an agent through the admin API",
    "conformance": "run the conformance kit's probes against an adapter",
    "bench": "measure cancellation latency: band-trio (and band-sdk) on the embedded platform",
    "runs-api": "serve Hermes' runs API (/v1/runs: start, events, stop) over an adapter",
    "bridge": "forward agent identities' room events to remote agents (HTTP, A2A, command)",
    "host": "run an adapter behind a bridge: serve its envelopes over HTTP",
}
"""Each command's line in `band-trio --help`: the same words its module gives
`add_parser` (a test compares them), here so that listing them imports no command."""

COMMANDS = tuple(SUMMARIES)


def _log_level(value: str) -> str:
    import logging  # only when the flag is given: `--version` needs none of it

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


class _Command(argparse.ArgumentParser):
    """A command's parser, whose flags its module adds the first time it parses."""

    command = ""
    loaded = False

    def load(self) -> None:
        """Import the command's module and let it add its flags (once); then the
        logging flags every command takes. Marked loaded only then: an import cut
        short (a Ctrl-C, a broken install) is tried again by the next parse."""
        if not self.loaded:
            module = importlib.import_module(f"{__package__}._{self.command.replace('-', '_')}")
            module.add_parser(_Adding(self))
            _add_logging_flags(self)
            self.loaded = True

    def parse_known_args(self, *args: Any, **kwargs: Any) -> Any:
        self.load()
        return super().parse_known_args(*args, **kwargs)


class _Adding:
    """What a command's `add_parser(commands)` is given: its own parser, made already."""

    def __init__(self, parser: _Command) -> None:
        self._parser = parser

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        if name != self._parser.command:
            raise ValueError(f"the module of {self._parser.command!r} adds {name!r}")
        kwargs.pop("help", None)  # the summary is SUMMARIES'
        for key, value in kwargs.items():
            if key not in ("description", "epilog"):
                raise TypeError(f"{name}: add_parser({key}=...) is not supported here")
            setattr(self._parser, key, value)
        return self._parser


def build_parser(*, load: bool = False) -> argparse.ArgumentParser:
    """The `band-trio` parser; with `load`, every command's flags are added at once
    (for a test or a tool that reads them), not when the command parses."""
    parser = argparse.ArgumentParser(
        prog="band-trio",
        description=_DESCRIPTION,
        epilog=EXIT_STATUSES,
        formatter_class=_Formatter,
    )
    parser.add_argument("--version", action="version", version=f"band-trio {__version__}")
    parser.set_defaults(log_level="WARNING", log_format="text")
    _add_logging_flags(parser)
    commands = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=_Command
    )
    for name, summary in SUMMARIES.items():  # each command's --help: what, and exits
        command: _Command = commands.add_parser(
            name,
            help=summary,
            description=f"{summary[:1].upper()}{summary[1:]}.",
            epilog=EXIT_STATUSES,
            formatter_class=_Formatter,
        )
        command.command = name
        if load:
            command.load()
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
