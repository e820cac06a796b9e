"""`--plot FILE.png`: the latency distributions per runtime (matplotlib, the `bench` extra)."""

from __future__ import annotations

from ..errors import ConfigurationError
from ._run import Report

__all__ = ["check_plotting", "plot"]

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
)


def check_plotting() -> None:
    """Fail before the run, not after it, when matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ConfigurationError(
            "--plot needs matplotlib: pip install 'band-trio[bench]'"
        ) from None


def plot(report: Report, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [
        (scenario, metric)
        for scenario, metric in PLOTTED
        if any(r.scenario == scenario and r.metric == metric and r.n for r in report.rows)
    ]
    figure, axes = plt.subplots(
        len(panels), 1, figsize=(10, 2.2 * len(panels) + 0.6), squeeze=False
    )
    colours = {"band-trio": "tab:blue", "band-sdk": "tab:orange"}
    for axis, (scenario, metric) in zip(axes[:, 0], panels, strict=True):
        rows = [r for r in report.rows if r.scenario == scenario and r.metric == metric and r.n]
        labels, data, colour = [], [], []
        for r in sorted(rows, key=lambda r: (r.rooms, r.runtime)):
            labels.append(f"{r.runtime}\n{r.rooms} room{'s' if r.rooms != 1 else ''}")
            data.append(list(r.samples_ms))
            colour.append(colours.get(r.runtime, "tab:gray"))
        parts = axis.boxplot(
            data, vert=False, tick_labels=labels, patch_artist=True, showfliers=True
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
        axis.set_xscale("log")
        axis.set_title(f"{scenario}: {metric} (ms)", fontsize=9)
        axis.tick_params(labelsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
