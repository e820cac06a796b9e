"""`band-trio conformance MODULE:FACTORY`: run every probe of the kit against an adapter.

Prints each probe as it finishes, then a table; `--json FILE` writes the
results too. Exits 0 only when no probe failed (a probe that does not apply
is not a failure), 1 when one did, 2 for an adapter that cannot be built.
Each probe runs in a trio run of its own and is bounded (`--probe-deadline`):
an adapter that never lets the cancel in fails its probes, it does not hang
the command.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from .. import errors

if TYPE_CHECKING:
    from ..testing import ProbeResult
from ._agent import load_adapter, load_callable
from ._exits import EXIT_FAILED, EXIT_OK

__all__ = ["add_parser"]

_MARK = {"passed": "pass", "failed": "FAIL", "not applicable": "n/a"}


def add_parser(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "conformance",
        help="run the conformance kit's probes against an adapter",
        description="Does the adapter stop when the room's users say so? Each probe runs "
        "the adapter on the embedded platform over real sockets.",
    )
    parser.add_argument("adapter", metavar="MODULE:FACTORY", help="a callable returning an Adapter")
    parser.add_argument(
        "--long",
        metavar="TEXT",
        help="a message that keeps the adapter at work until aborted (default: the kit's)",
    )
    parser.add_argument(
        "--quick",
        metavar="TEXT",
        help="a message the adapter answers quickly (default: the kit's)",
    )
    parser.add_argument(
        "--ask",
        metavar="TEXT",
        help="for an adapter that asks the room (turn.ask): a message that makes it ask "
        "(without it the question probes do not apply)",
    )
    parser.add_argument(
        "--steer",
        metavar="TEXT",
        help="a message the adapter works on for a second or so, then answers: the guidance "
        "probe offers messages to that turn (default: the kit's, sleep=1)",
    )
    parser.add_argument(
        "--tool",
        metavar="TEXT",
        help="for a tool-calling adapter: a message that makes the model call tools",
    )
    parser.add_argument(
        "--transcript",
        metavar="MODULE:FUNC",
        help="with --tool: FUNC(adapter, room_id) returns the OpenAI-style messages it keeps",
    )
    parser.add_argument(
        "--settle",
        type=float,
        metavar="SECONDS",
        help="how long a turn may take to start its remote work before the probes take it "
        "that it has none (default: the kit's, 0.3 s; a slow peer needs more)",
    )
    parser.add_argument(
        "--probe",
        action="append",
        metavar="NAME",
        help="run only the probes named like this (part of a name; may be repeated)",
    )
    parser.add_argument(
        "--deadline",
        type=float,
        metavar="SECONDS",
        help="the longest a probe waits for any one thing (default: the kit's, 20 s)",
    )
    parser.add_argument(
        "--probe-deadline",
        type=float,
        metavar="SECONDS",
        help="the longest a probe may take in all; past it the probe fails, its adapter "
        "taken as one that never lets the cancel in (default: the kit's, 120 s)",
    )
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the results here")
    parser.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    # here, not at the top: the kit loads the platform, which an agent's start does not need
    from ..testing import PROBES, Subject, run_probes, select_probes, table

    if args.json is not None and not args.json.parent.is_dir():
        raise errors.ConfigurationError(f"--json: no folder {args.json.parent}")
    # a factory that cannot be built is one line, before any probe
    load_adapter(args.adapter, what="the adapter")
    if (args.tool is None) != (args.transcript is None):
        raise errors.ConfigurationError("--tool and --transcript go together")
    transcript = None if args.transcript is None else load_callable(args.transcript)
    if args.settle is not None and not 0 < args.settle < 600:
        raise errors.ConfigurationError(
            f"--settle takes seconds between 0 and 600, not {args.settle}"
        )
    for flag, value in (("--deadline", args.deadline), ("--probe-deadline", args.probe_deadline)):
        if value is not None and not 0 < value < 3600:
            raise errors.ConfigurationError(f"{flag} takes seconds between 0 and 3600, not {value}")
    try:
        probes = select_probes(args.probe) if args.probe else list(PROBES)
    except ValueError as exc:
        raise errors.ConfigurationError(f"--probe: {exc}") from None
    prompts: dict[str, Any] = {
        "long_prompt": args.long,
        "quick_prompt": args.quick,
        "ask_prompt": args.ask,
        "steer_prompt": args.steer,
        "settle": args.settle,
        "deadline": args.deadline,
        "probe_deadline": args.probe_deadline,
    }
    subject = Subject(
        lambda: load_adapter(args.adapter, what="the adapter"),
        **{name: text for name, text in prompts.items() if text is not None},
        tool_prompt=args.tool,
        transcript=transcript,
    )
    print(f"band-trio conformance: {args.adapter}, {len(probes)} probes", flush=True)
    results = trio.run(partial(run_probes, subject, probes, progress=_progress))
    print()
    print(table(results))
    if args.json is not None:
        args.json.write_text(json.dumps([_as_dict(r) for r in results], indent=2) + "\n")
    print(f"\n{summary(results)}")
    return EXIT_OK if all(r.passed for r in results) else EXIT_FAILED


def summary(results: Sequence[ProbeResult]) -> str:
    """`11 probes: 8 passed, 3 do not apply, 0 failed` — each outcome counted apart."""
    counts = Counter(r.outcome for r in results)
    return (
        f"{len(results)} probe{'' if len(results) == 1 else 's'}: {counts['passed']} passed, "
        f"{counts['not applicable']} do not apply, {counts['failed']} failed"
    )


def _progress(result: ProbeResult) -> None:
    print(f"  {_MARK[result.outcome]:<4}  {result.name}", flush=True)


def _as_dict(result: ProbeResult) -> dict[str, object]:
    return {
        "probe": result.name,
        "outcome": result.outcome,
        "passed": result.passed,
        "latency_s": result.latency,
        "observed": result.observed,
    }
