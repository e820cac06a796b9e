"""The `band-trio` command: `platform`, `agent`, `demo`, `ctl`, `conformance`, `bench`,
`runs-api`, `bridge` and `host`.

Exit statuses: 0 success; 1 an unexpected error (a crash); 2 bad usage or
configuration; 3 the platform ended the agent's session for good (terminal
disconnect, or a key it refuses).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from .. import errors
from . import _agent, _bench, _bridge, _conformance, _ctl, _demo, _host, _platform, _runs_api
from ._exits import EXIT_CONFIG as EXIT_CONFIG
from ._exits import EXIT_CRASH as EXIT_CRASH
from ._exits import EXIT_DISCONNECTED as EXIT_DISCONNECTED
from ._exits import EXIT_OK as EXIT_OK
from ._exits import single

__all__ = ["EXIT_CONFIG", "EXIT_CRASH", "EXIT_DISCONNECTED", "EXIT_OK", "main"]


def _log_level(value: str) -> str:
    level = value.upper()
    if level not in logging.getLevelNamesMapping():
        names = ", ".join(n for n in logging.getLevelNamesMapping() if n != "NOTSET")
        raise argparse.ArgumentTypeError(f"unknown level {value!r} (one of {names})")
    return level


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="band-trio", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--log-level", default="WARNING", type=_log_level, help="logging level (default: WARNING)"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    _platform.add_parser(commands)
    _agent.add_parser(commands)
    _demo.add_parser(commands)
    _ctl.add_parser(commands)
    _conformance.add_parser(commands)
    _bench.add_parser(commands)
    _runs_api.add_parser(commands)
    _bridge.add_parser(commands)
    _host.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        code: int = args.run(args)
    except BaseException as exc:  # the boundary: a configuration error is one line
        error = single(exc)
        if isinstance(error, errors.ConfigurationError):
            print(f"band-trio: {error}", file=sys.stderr)
            return EXIT_CONFIG
        raise
    return code


if __name__ == "__main__":
    sys.exit(main())
