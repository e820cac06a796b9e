"""The `band-trio` command: `platform`, `agent`, `demo`, `ctl`, `conformance`, `bench`,
`runs-api`, `bridge` and `host` (docs/reference/cli.md).

This is the one boundary where an error becomes an exit status (`_exits`): a
`ConfigurationError` is one line and 2, a refused key 3, a platform that cannot
be reached or answers wrongly one line and 1, a reader of stdout gone (`| head`)
nothing and 141, a Ctrl-C before the command serves SIGINT itself one line and
130. Anything else is a bug, and Python's traceback says where.

The package itself imports next to nothing: the console script runs `from
band_trio.cli import main` outside any handler, so a Ctrl-C during an import
there is Python's own traceback. The parser is loaded inside `main`, where the
interrupt is caught, and it loads only the command run (trio, httpx2, the runtime:
~0.3 s): `--version` and `--help` load none (`_parser`).
"""

from __future__ import annotations

import os
import select
import sys

from ._exits import EXIT_CONFIG as EXIT_CONFIG
from ._exits import EXIT_CRASH as EXIT_CRASH
from ._exits import EXIT_DISCONNECTED as EXIT_DISCONNECTED
from ._exits import EXIT_FAILED as EXIT_FAILED
from ._exits import EXIT_INTERRUPTED as EXIT_INTERRUPTED
from ._exits import EXIT_OK as EXIT_OK
from ._exits import EXIT_PIPE as EXIT_PIPE
from ._exits import single

TYPE_CHECKING = False  # not `typing`'s: see the docstring (and band_trio's)
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

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


def build_parser() -> argparse.ArgumentParser:
    """The `band-trio` parser, every command's flags (`_parser`: loaded on first use).

    Every command's module is imported here; `main` imports only the one it runs."""
    from ._parser import build_parser as build

    return build(load=True)


def main(argv: Sequence[str] | None = None) -> int:
    """`band-trio ARGV`: the exit status (docs/reference/cli.md, "Exit statuses").

    A reader of stdout that goes away (`band-trio demo | head -3`) ends the command
    quietly with `EXIT_PIPE`, as a tool killed by SIGPIPE would: Python ignores the
    signal, so the write raises `BrokenPipeError` wherever it happens (often inside
    a nursery). The last of the output is flushed here, while the error can still
    be caught, and stdout is pointed at /dev/null so the interpreter's own flush
    at exit finds nothing to complain about. Only a broken *stdout* is quiet: a
    `BrokenPipeError` from anything else is a bug and keeps its traceback.

    A Ctrl-C anywhere before the command serves SIGINT itself (while the commands
    load, while parsing, in `trio.run` before its signal receiver) is one line and
    `EXIT_INTERRUPTED`, never a `KeyboardInterrupt` traceback."""
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
        error = single(exc)
        if isinstance(error, KeyboardInterrupt):
            return _interrupted()
        if not (isinstance(error, BrokenPipeError) and _stdout_gone()):
            raise
        return EXIT_PIPE
    return code


def _interrupted() -> int:
    print("band-trio: interrupted", file=sys.stderr, flush=True)
    return EXIT_INTERRUPTED


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
    from ._parser import build_parser as build  # here: see the module's docstring

    args = build().parse_args(argv)  # imports the one command run (`--version`: none)
    from .. import errors, observe

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
            return _interrupted()
        raise
    return code


if __name__ == "__main__":
    sys.exit(main())
