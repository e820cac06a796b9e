"""The long chaos run: many seeds, many steps, one line per seed.

    .venv/bin/python benchmarks/chaos.py --seeds 1-10 --steps 5000 --rooms 20

Exits non-zero if any seed broke a promise (the report lists which). The test
suite runs the same scenario bounded (tests/integration/test_chaos.py).
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile

import trio

from band_trio.testing import ChaosReport, run_chaos


def seeds(spec: str) -> list[int]:
    first, _, last = spec.partition("-")
    return list(range(int(first), int(last or first) + 1))


async def main(args: argparse.Namespace) -> list[ChaosReport]:
    reports = []
    for seed in seeds(args.seeds):
        with tempfile.TemporaryDirectory() as directory:
            report = await run_chaos(
                seed=seed,
                steps=args.steps,
                rooms=args.rooms,
                db=f"{directory}/chaos.db",
                settle_deadline=60,
            )
        reports.append(report)
        faults = sum(report.faults.values())
        print(
            f"seed {seed:3}: {'ok  ' if report.ok else 'FAIL'} {report.messages:5} messages "
            f"{dict(report.outcomes)}  {faults} faults ({report.restarts} restarts), "
            f"{sum(report.signals.values())} signals, {report.connects} connects, "
            f"{report.elapsed:.1f} s",
            flush=True,
        )
        for violation in report.violations:
            print(f"          {violation}", flush=True)
    return reports


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", default="1-5", help="a seed or a range, e.g. 1-10")
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--rooms", type=int, default=20)
    logging.disable(logging.CRITICAL)
    results = trio.run(main, parser.parse_args())
    sys.exit(0 if all(report.ok for report in results) else 1)
