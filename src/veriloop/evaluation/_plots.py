"""The report's plots, drawn with matplotlib and returned as inline SVG text."""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

_COLOURS = [
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
]


def _svg(figure: Any) -> str:
    import matplotlib

    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "veriloop"}):
        figure.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    text = buffer.getvalue()
    return text[text.index("<svg") :]


def _figure(width: float = 8.0, height: float = 3.6) -> tuple[Any, Any]:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height))
    axes = figure.subplots()
    axes.grid(True, alpha=0.3)
    axes.spines[["top", "right"]].set_visible(False)
    return figure, axes


def trend_plot(
    labels: Sequence[str], total: Sequence[tuple[float, float, float]], domains: dict[str, Sequence[float | None]]
) -> str:
    """pass@1 across runs: the total with its interval band, and one line per domain.

    ``total`` holds ``(pass@1, ci_low, ci_high)`` per run; a domain's value is None in runs
    that did not have it.
    """
    figure, axes = _figure()
    x = list(range(len(labels)))
    axes.fill_between(x, [t[1] for t in total], [t[2] for t in total], color="black", alpha=0.1, linewidth=0)
    axes.plot(x, [t[0] for t in total], color="black", linewidth=2.5, marker="o", label="all tasks")
    for index, (domain, values) in enumerate(sorted(domains.items())):
        points = [(i, v) for i, v in zip(x, values) if v is not None]
        axes.plot(
            [p[0] for p in points],
            [p[1] for p in points],
            marker="o",
            linewidth=1.5,
            color=_COLOURS[index % len(_COLOURS)],
            label=domain,
        )
    axes.set_xticks(x, labels, rotation=20 if len(labels) > 4 else 0, ha="right" if len(labels) > 4 else "center")
    axes.set_ylabel("pass@1")
    axes.set_ylim(-0.02, 1.02)
    axes.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    return _svg(figure)


def domain_bars(domains: Sequence[str], runs: dict[str, dict[str, tuple[float, float, float]]]) -> str:
    """Grouped bars: pass@1 per domain, one bar per run, with interval whiskers.

    ``runs`` maps a run label to ``domain -> (pass@1, ci_low, ci_high)``.
    """
    figure, axes = _figure(width=max(6.0, 1.4 * len(domains) + 3))
    width = 0.8 / max(len(runs), 1)
    for index, (label, values) in enumerate(runs.items()):
        xs, heights, low, high = [], [], [], []
        for position, domain in enumerate(domains):
            if domain in values:
                value, ci_low, ci_high = values[domain]
                xs.append(position - 0.4 + width * (index + 0.5))
                heights.append(value)
                low.append(max(value - ci_low, 0.0))
                high.append(max(ci_high - value, 0.0))
        axes.bar(
            xs,
            heights,
            width=width * 0.92,
            yerr=[low, high],
            capsize=2,
            label=label,
            color=_COLOURS[index % len(_COLOURS)],
            error_kw={"elinewidth": 0.8},
        )
    axes.set_xticks(range(len(domains)), domains)
    axes.set_ylabel("pass@1")
    axes.set_ylim(0, 1.05)
    axes.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    return _svg(figure)


def reward_curves(runs: dict[str, list[dict[str, Any]]]) -> str:
    """Mean sampled reward per step of each training run, and its eval pass@1 where logged."""
    figure, axes = _figure()
    for index, (label, records) in enumerate(runs.items()):
        colour = _COLOURS[index % len(_COLOURS)]
        key = next((k for k in ("reward/sampled_mean", "reward/mean") if any(k in r for r in records)), None)
        if key is not None:
            points = [(r["step"], r[key]) for r in records if isinstance(r.get(key), (int, float)) and "step" in r]
            axes.plot(
                [p[0] for p in points], [p[1] for p in points], color=colour, linewidth=1.5, label=f"{label}: {key}"
            )
        evals = [
            (r["step"], r["eval/pass@1"])
            for r in records
            if isinstance(r.get("eval/pass@1"), (int, float)) and "step" in r
        ]
        if evals:
            axes.plot(
                [p[0] for p in evals],
                [p[1] for p in evals],
                color=colour,
                linestyle="--",
                marker="s",
                label=f"{label}: eval pass@1",
            )
    axes.set_xlabel("step")
    axes.set_ylabel("reward / pass@1")
    axes.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    return _svg(figure)


_DOMAIN_PREFIX = "domain/"
_STYLES = ["-", "--", ":", "-."]


def domain_series(records: list[dict[str, Any]], metric: str) -> dict[str, list[tuple[int, float]]]:
    """``domain -> [(step, value)]`` of the ``domain/<name>/<metric>`` values in training records."""
    series: dict[str, list[tuple[int, float]]] = {}
    for record in records:
        for key, value in record.items():
            if key.startswith(_DOMAIN_PREFIX) and isinstance(value, (int, float)) and "step" in record:
                domain, _, name = key[len(_DOMAIN_PREFIX) :].rpartition("/")
                if name == metric and domain:
                    series.setdefault(domain, []).append((record["step"], float(value)))
    return dict(sorted(series.items()))


def domain_curves(runs: dict[str, list[dict[str, Any]]], metrics: Sequence[str], ylabel: str) -> str:
    """One line per (run, domain, metric): colour by domain, line style by metric."""
    figure, axes = _figure()
    colours: dict[str, str] = {}
    for label, records in runs.items():
        for style, metric in zip(_STYLES * len(metrics), metrics):
            for domain, points in domain_series(records, metric).items():
                colour = colours.setdefault(domain, _COLOURS[len(colours) % len(_COLOURS)])
                name = " ".join(
                    part
                    for part in (label if len(runs) > 1 else "", domain, metric if len(metrics) > 1 else "")
                    if part
                )
                axes.plot(
                    [p[0] for p in points],
                    [p[1] for p in points],
                    color=colour,
                    linestyle=style,
                    linewidth=1.5,
                    marker="o" if len(points) < 3 else None,
                    label=name,
                )
    axes.set_xlabel("step")
    axes.set_ylabel(ylabel)
    axes.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    return _svg(figure)


_BUSY_SERIES = (
    ("util/trainer_busy_s", "trainer busy", "-"),
    ("util/generator_busy_s", "generator busy", "--"),
    ("util/trainer_wait_s", "trainer waiting", ":"),
)


def utilisation_curves(runs: dict[str, list[dict[str, Any]]]) -> str:
    """Seconds per step the trainer and the generator were busy, and the trainer waited.

    Colour by run, line style by series (solid: trainer busy, dashed: generator busy, dotted:
    trainer waiting for its batch). Only records that carry ``util/*`` values are drawn.
    """
    figure, axes = _figure()
    for index, (label, records) in enumerate(runs.items()):
        colour = _COLOURS[index % len(_COLOURS)]
        for key, name, style in _BUSY_SERIES:
            points = [(r["step"], r[key]) for r in records if isinstance(r.get(key), (int, float)) and "step" in r]
            if points:
                axes.plot(
                    [p[0] for p in points],
                    [p[1] for p in points],
                    color=colour,
                    linestyle=style,
                    linewidth=1.5,
                    marker="o" if len(points) < 3 else None,
                    label=f"{label}: {name}" if len(runs) > 1 else name,
                )
    axes.set_xlabel("step")
    axes.set_ylabel("seconds per step")
    axes.set_ylim(bottom=0)
    axes.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    return _svg(figure)
