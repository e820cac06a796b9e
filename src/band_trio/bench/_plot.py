"""`--plot FILE.png`: the latency distributions per runtime (matplotlib, the `bench` extra)."""

from __future__ import annotations

import math
from typing import Any

from ..errors import ConfigurationError
from ._run import Report

__all__ = ["check_plotting", "figure", "log_ticks", "plot"]

PLOTTED = (
    ("interrupt", "signal → adapter cancelled"),
    ("interrupt", "signal → processed arrives"),
    ("agent interrupt", "signal → adapter cancelled"),
    ("stop", "signal → adapter cancelled"),
    ("stop", "signal → working:false arrives"),
    ("play", "signal → adapter re-entered"),
    ("remote stop: command", "interrupt → process group gone"),
    ("remote stop: stubllm", "interrupt → stubllm generator cancelled"),
    ("remote stop: a2a", "interrupt → a2a-sdk task CANCELED"),
    ("remote stop: copilot", "interrupt → stubllm generator cancelled by the CLI"),
    ("remote stop: acp", "interrupt → stubllm generator cancelled by opencode acp"),
)


def check_plotting() -> None:
    """Fail before the run, not after it, when matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ConfigurationError(
            "--plot needs matplotlib: pip install 'band-trio[bench]'"
        ) from None


STEPS = (
    (1.0, 2.0, 5.0),
    (1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0),
    (1.0, 1.2, 1.4, 1.6, 1.8, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0),
)
"""Ticks within a decade, coarsest first: the first that puts at least 3 in range; powers
of ten alone where 1, 2, 5 would put more than 10."""


def log_ticks(low: float, high: float) -> list[float]:
    """Round numbers for a log axis from `low` to `high` (ms): 1, 2, 5, 10, 20, ... where
    they fit, finer steps over a narrow range, powers of ten over a wide one."""
    decades = range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)

    def within(steps: tuple[float, ...]) -> list[float]:
        return [
            value
            for exponent in decades
            for step in steps
            if low <= (value := float(f"{step * 10.0**exponent:.6g}")) <= high
        ]

    if len(within(STEPS[0])) > 10:
        return within((1.0,))
    ticks: list[float] = []
    for steps in STEPS:
        ticks = within(steps)
        if len(ticks) >= 3:
            break
    return ticks


def _plain(value: float, _position: object = None) -> str:
    """0.5, 1, 20, 1,000: never "5 x 10^-1"."""
    return f"{value:,.0f}" if value >= 1000 else f"{value:g}"


def figure(report: Report) -> Any:
    """The figure `plot` saves: one panel per plotted metric, its runtimes and sizes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter, NullLocator

    panels = [
        (scenario, metric)
        for scenario, metric in PLOTTED
        if any(r.scenario == scenario and r.metric == metric and r.n for r in report.rows)
    ]
    drawn, axes = plt.subplots(len(panels), 1, figsize=(10, 2.2 * len(panels) + 0.6), squeeze=False)
    colours = {"band-trio": "tab:blue", "band-sdk": "tab:orange"}
    for axis, (scenario, metric) in zip(axes[:, 0], panels, strict=True):
        rows = [r for r in report.rows if r.scenario == scenario and r.metric == metric and r.n]
        labels, data, colour = [], [], []
        for r in sorted(rows, key=lambda r: (r.rooms, r.runtime)):
            labels.append(f"{r.runtime}\n{r.rooms} room{'s' if r.rooms != 1 else ''}")
            data.append(list(r.samples_ms))
            colour.append(colours.get(r.runtime, "tab:gray"))
        parts = axis.boxplot(
            data, orientation="horizontal", tick_labels=labels, patch_artist=True, showfliers=True
        )
        for patch, c in zip(parts["boxes"], colour, strict=True):
            patch.set_facecolor(c)
            patch.set_alpha(0.5)
        floor = rows[0].floor_p50_ms
        if floor is not None:
            axis.axvline(
                floor, color="tab:red", linestyle="--", linewidth=1, label=f"floor {floor:.2f} ms"
            )
            axis.legend(loc="lower right", fontsize=7)
        values = [v for samples in data for v in samples if v > 0]
        if floor is not None and floor > 0:
            values.append(floor)
        low, high = min(values) / 1.15, max(values) * 1.15
        axis.set_xscale("log")
        axis.set_xlim(low, high)
        axis.xaxis.set_major_locator(FixedLocator(log_ticks(low, high)))
        axis.xaxis.set_major_formatter(FuncFormatter(_plain))
        axis.xaxis.set_minor_locator(NullLocator())
        axis.xaxis.set_minor_formatter(NullFormatter())
        axis.set_xlabel("ms", fontsize=7, loc="right")
        axis.set_title(f"{scenario}: {metric}", fontsize=9)
        axis.tick_params(labelsize=7)
    drawn.tight_layout()
    return drawn


def plot(report: Report, path: str) -> None:
    """Draw the distributions (log scale, plain ms labels) and save them to `path`."""
    import matplotlib.pyplot as plt

    drawn = figure(report)
    drawn.savefig(path, dpi=110)
    plt.close(drawn)
