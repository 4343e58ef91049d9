"""``write_report``: one self-contained HTML file over eval runs and training runs.

Every plot is inline SVG and the styles are inline, so the file opens anywhere, offline, and
can be attached to a review. Sections: runs at a glance, pass@1 trend per domain across runs,
per-domain bars, reward curves of training runs (and, for multi-domain runs, per-domain
reward, pass rate, sample share, curriculum buckets and held-out checks), the pipeline
utilisation of training runs that log ``util/*`` metrics, each eval run compared with the one
before, and failure examples with the verifier's feedback and, behind a click, the task's
expected answer (from the task files the eval run lists, when they are still there).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

from veriloop.core import Task, UserError, atomic_write
from veriloop.evaluation._compare import compare
from veriloop.evaluation._plots import (
    domain_bars,
    domain_curves,
    domain_series,
    reward_curves,
    trend_plot,
    utilisation_curves,
)
from veriloop.evaluation._agreement import agreement, agreement_html
from veriloop.evaluation._judgments import JudgmentStore
from veriloop.evaluation._run_registry import RunRegistry, default_registry_path
from veriloop.evaluation._samples import SAMPLES_FILE, SUMMARY_FILE, EvalRun, load_run, load_run_tasks

METRICS_FILE = "metrics.jsonl"
_CLIP = 700


@dataclass(frozen=True)
class TrendPoint:
    """One run on the trend line: its label and its summary."""

    label: str
    summary: dict[str, Any]


def _training_records(directory: Path) -> list[dict[str, Any]]:
    """The per-step records of ``metrics.jsonl``; a torn last line (a run still writing) is skipped."""
    path = directory / METRICS_FILE
    lines = path.read_text(encoding="utf-8").splitlines()
    last = max((number for number, line in enumerate(lines, start=1) if line.strip()), default=0)
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as exc:
            if number < last:
                raise UserError(f"{path}: line {number}: malformed JSON: {exc.msg}") from None
    return records


def _load_inputs(paths: Sequence[str | os.PathLike[str]]) -> tuple[list[EvalRun], dict[str, list[dict[str, Any]]]]:
    evals, training = [], {}
    for item in paths:
        directory = Path(item)
        if (directory / SAMPLES_FILE).is_file() or (directory / SUMMARY_FILE).is_file():
            evals.append(load_run(directory))
        elif (directory / METRICS_FILE).is_file():
            training[directory.name or str(directory)] = _training_records(directory)
        else:
            raise UserError(
                f"{directory}: neither an eval directory ({SUMMARY_FILE}, {SAMPLES_FILE}) "
                f"nor a training run ({METRICS_FILE})"
            )
    return evals, training


def _trend_points(evals: list[EvalRun], registry: str | os.PathLike[str] | None) -> list[TrendPoint]:
    """The given runs in order; with a registry, its runs of the same task sets, oldest first."""
    points = [TrendPoint(run.label, run.summary) for run in evals if run.summary]
    if registry is None:
        return points
    if not Path(registry).is_file():
        raise UserError(f"{registry}: no such run registry")
    hashes = {run.summary.get("task_set_hash") for run in evals}
    given = {str(run.path.resolve()) for run in evals}
    extra = [
        r for r in RunRegistry(registry).runs() if (not evals or r.task_set_hash in hashes) and r.out_dir not in given
    ]
    merged = points + [TrendPoint(r.label, r.summary) for r in extra]
    return sorted(merged, key=lambda p: p.summary.get("created_at", ""))


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _ci(block: dict[str, Any]) -> str:
    low, high = block.get("pass@1_ci", [0.0, 1.0])
    return f"{_pct(block.get('pass@1'))} <span class=ci>[{_pct(low)}, {_pct(high)}]</span>"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _runs_section(points: list[TrendPoint]) -> str:
    rows = []
    for point in points:
        s = point.summary
        k = str(s.get("samples_per_task", 1))
        rows.append(
            [
                escape(point.label),
                escape(str(s.get("model", ""))),
                str(s.get("tasks", "")),
                k,
                _ci(s),
                _pct(s.get("pass@k", {}).get(k)),
                str(s.get("infra_errors", 0)),
                str(s.get("tokens", {}).get("completion", "")),
                f"{s.get('time', {}).get('wall_s', 0):.1f}",
                escape(str(s.get("created_at", ""))),
            ]
        )
    header = ["run", "model", "tasks", "K", "pass@1 [95% CI]", "pass@K", "infra errors", "tokens", "wall s", "finished"]
    return "<h2>Runs</h2>" + _table(header, rows)


def _plots_section(points: list[TrendPoint]) -> str:
    domains = sorted({d for p in points for d in p.summary.get("domains", {})})
    labels = [p.label for p in points]
    # A run with no scored sample has pass@1 None: a gap in the trend, no bar.
    nan = float("nan")
    total = [
        (nan if p.summary["pass@1"] is None else p.summary["pass@1"], *p.summary.get("pass@1_ci", [0.0, 1.0]))
        for p in points
    ]
    lines = {d: [p.summary["domains"].get(d, {}).get("pass@1") for p in points] for d in domains}
    shown = points[-6:]
    bars = {
        p.label: {
            d: (b["pass@1"], *b["pass@1_ci"])
            for d, b in p.summary.get("domains", {}).items()
            if b["pass@1"] is not None
        }
        for p in shown
    }
    return (
        "<h2>pass@1 across runs</h2><div class=plot>" + trend_plot(labels, total, lines) + "</div>"
        "<h2>pass@1 per domain</h2><div class=plot>" + domain_bars(domains, bars) + "</div>"
    )


def _comparison_section(evals: list[EvalRun]) -> str:
    parts = ["<h2>Each run against the one before</h2>"]
    for before, after in zip(evals, evals[1:]):
        result = compare(before.samples, after.samples)
        rows = []
        for d in result.domains:
            arrow = {
                "up": "<span class=up>&#9650; significant</span>",
                "down": "<span class=down>&#9660; significant</span>",
            }.get(d.direction, "")
            rows.append(
                [
                    escape(d.domain),
                    str(d.tasks),
                    _pct(d.a),
                    _pct(d.b),
                    f"{100 * d.delta:+.1f}",
                    f"[{100 * d.ci_low:+.1f}, {100 * d.ci_high:+.1f}]",
                    f"{d.p_value:.3f}",
                    arrow,
                ]
            )
        title = f"{escape(after.label)} vs {escape(before.label)}"
        if before.summary.get("task_set_hash") != after.summary.get("task_set_hash"):
            title += " <span class=ci>(different task sets: compared on the tasks both have)</span>"
        notes = f"{len(result.pass_to_fail)} tasks went pass&rarr;fail, {len(result.fail_to_pass)} fail&rarr;pass" + (
            "; <b class=down>seesaw: one domain rose while another fell</b>" if result.seesaw else ""
        )
        parts.append(
            f"<h3>{title}</h3>"
            + _table(["domain", "tasks", "before", "after", "delta (points)", "95% CI", "p", ""], rows)
            + f"<p>{notes}</p>"
        )
    return "".join(parts) if len(evals) > 1 else ""


_DOMAIN_PANELS = (
    ("Training reward per domain", ("reward",), "mean sampled reward"),
    ("Pass rate per domain", ("pass_rate",), "pass rate of sampled answers"),
    ("Share of each step's trained prompts", ("share",), "share"),
    (
        "Curriculum buckets (solid: learnable, dashed: too easy, dotted: too hard, dash-dot: retired)",
        ("learnable", "too_easy", "too_hard", "retired"),
        "tasks",
    ),
    ("Held-out pass@1 per domain (seesaw checks)", ("heldout_pass@1",), "pass@1"),
)


def _domain_training_section(training: dict[str, list[dict[str, Any]]]) -> str:
    """Per-domain curves of multi-domain runs (``domain/<name>/<metric>`` records); empty otherwise."""
    parts = []
    for title, metrics, ylabel in _DOMAIN_PANELS:
        if any(domain_series(records, metric) for records in training.values() for metric in metrics):
            parts.append(
                f"<h2>{escape(title)}</h2><div class=plot>" + domain_curves(training, metrics, ylabel) + "</div>"
            )
    return "".join(parts)


_STALENESS_PREFIX = "staleness/hist/"


@dataclass(frozen=True)
class Utilisation:
    """Where a training run's time went, from the ``util/*`` and ``staleness/*`` step metrics."""

    steps: int  # step records with utilisation metrics
    step_s: float  # mean wall seconds per step (busy plus waiting)
    trainer_busy: float | None  # fraction of the run's wall time the trainer was busy (cumulative, last step)
    generator_busy: float | None  # the same for the generator (sampling batches)
    sandbox_busy: float | None  # sandbox busy fraction during rollouts, weighted by rollout seconds
    inference_to_training: float | None  # mean generator busy seconds over mean trainer busy seconds
    queue_depth: float | None  # mean batches ready when the trainer asked for one
    staleness: dict[int, int]  # versions behind the trainer -> trajectories, summed over steps


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _numbers(records: Sequence[dict[str, Any]], key: str) -> list[float]:
    return [float(r[key]) for r in records if isinstance(r.get(key), (int, float))]


def pipeline_utilisation(records: Sequence[dict[str, Any]]) -> Utilisation | None:
    """Summary of a run's utilisation metrics; None when it logged none (an older or non-RL run)."""
    steps = [r for r in records if isinstance(r.get("util/trainer_busy_s"), (int, float))]
    if not steps:
        return None
    last = steps[-1]
    trainer, generator = _numbers(steps, "util/trainer_busy_s"), _numbers(steps, "util/generator_busy_s")
    sandbox = [
        (float(r["util/sandbox_busy_fraction"]), float(r.get("time/rollout_s", 1.0)))
        for r in steps
        if isinstance(r.get("util/sandbox_busy_fraction"), (int, float))
    ]
    rollout_s = sum(seconds for _, seconds in sandbox)
    staleness: dict[int, int] = {}
    for record in steps:
        for key, value in record.items():
            if (
                key.startswith(_STALENESS_PREFIX)
                and key[len(_STALENESS_PREFIX) :].isdigit()
                and isinstance(value, (int, float))
            ):
                age = int(key[len(_STALENESS_PREFIX) :])
                staleness[age] = staleness.get(age, 0) + int(value)
    mean_trainer, mean_generator = _mean(trainer), _mean(generator)
    return Utilisation(
        steps=len(steps),
        step_s=_mean(_numbers(steps, "time/step_s")) or 0.0,
        trainer_busy=last.get("util/trainer_busy_fraction"),
        generator_busy=last.get("util/generator_busy_fraction"),
        sandbox_busy=sum(f * s for f, s in sandbox) / rollout_s if rollout_s > 0 else None,
        inference_to_training=mean_generator / mean_trainer if mean_generator is not None and mean_trainer else None,
        queue_depth=_mean(_numbers(steps, "util/queue_depth")),
        staleness=dict(sorted(staleness.items())),
    )


def _staleness_cell(histogram: dict[int, int]) -> str:
    if not histogram:
        return "-"
    total = sum(histogram.values())
    mean = sum(age * count for age, count in histogram.items()) / max(total, 1)
    counts = ", ".join(f"{age}: {count}" for age, count in histogram.items())
    return f"{counts} <span class=ci>(mean {mean:.2f})</span>"


def _utilisation_section(training: dict[str, list[dict[str, Any]]]) -> str:
    """Busy fractions, inference/training ratio, queue depth and staleness per run; empty without util metrics."""
    summaries = {label: pipeline_utilisation(records) for label, records in training.items()}
    shown = {label: u for label, u in summaries.items() if u is not None}
    if not shown:
        return ""
    rows = []
    for label, u in shown.items():
        ratio = "-" if u.inference_to_training is None else f"{u.inference_to_training:.2f}"
        depth = "-" if u.queue_depth is None else f"{u.queue_depth:.2f}"
        rows.append(
            [
                escape(label),
                str(u.steps),
                f"{u.step_s:.2f}",
                _pct(u.trainer_busy),
                _pct(u.generator_busy),
                _pct(u.sandbox_busy),
                ratio,
                depth,
                _staleness_cell(u.staleness),
            ]
        )
    header = [
        "run",
        "steps",
        "s per step",
        "trainer busy",
        "generator busy",
        "sandbox busy",
        "inference / training",
        "queue depth",
        "staleness (versions: trajectories)",
    ]
    plotted = {label: training[label] for label in shown}
    return (
        "<h2>Pipeline utilisation</h2>"
        + _table(header, rows)
        + "<p class=ci>Trainer and generator busy: share of the run's wall time (both can be near 100% when "
        "generation overlaps training). Sandbox busy: share of rollout time the sandbox workers were busy "
        "(<code>util/sandbox_busy_fraction</code>, weighted by rollout seconds). "
        "Inference / training: mean generator busy seconds per step over mean trainer busy seconds.</p>"
        + "<h3>Busy seconds per step (solid: trainer, dashed: generator, dotted: trainer waiting)</h3>"
        + "<div class=plot>"
        + utilisation_curves(plotted)
        + "</div>"
    )


def _clip(text: str) -> str:
    return escape(text if len(text) <= _CLIP else text[:_CLIP] + " ...")


def _expected_answer(task: Task | None) -> str:
    """The task's gold behind a click (never shown to a model; a person may look), or why there is none."""
    if task is None:
        return "<div class=label>expected answer not available</div>"
    if task.gold is None:
        return "<div class=label>the task has no expected answer</div>"
    gold = task.gold if isinstance(task.gold, str) else json.dumps(task.gold, indent=2, ensure_ascii=False, default=str)
    return (
        f"<details><summary class=label>expected answer (the task's gold)</summary><pre>{_clip(gold)}</pre></details>"
    )


def _failures_section(run: EvalRun, per_domain: int) -> str:
    parts = [f"<h2>Failures of {escape(run.label)}</h2>"]
    tasks = load_run_tasks(run)
    for domain in sorted({s.domain for s in run.samples}):
        first_failure: dict[str, Any] = {}
        for sample in run.samples:
            if sample.domain == domain and sample.status == "scored" and not sample.passed:
                first_failure.setdefault(sample.task_id, sample)
        for s in list(first_failure.values())[:per_domain]:
            parts.append(
                f"<div class=failure><div class=meta>{escape(domain)} &middot; {escape(s.task_id)} &middot; sample {s.sample_index}"
                f" &middot; reward {s.reward}</div><div class=label>prompt</div><pre>{_clip(s.prompt)}</pre>"
                f"<div class=label>response</div><pre>{_clip(s.response)}</pre>{_expected_answer(tasks.get(s.task_id))}"
                f"<div class=label>verifier</div><pre class=feedback>{_clip(s.feedback or s.detail)}</pre></div>"
            )
    infra = [s for s in run.samples if s.status == "infra_error"]
    if infra:
        details = sorted({s.detail for s in infra})[:5]
        parts.append(
            f"<h3>{len(infra)} infra errors (not counted as failures)</h3>"
            + "".join(f"<pre>{_clip(d)}</pre>" for d in details)
        )
    return "".join(parts)


def _review_section(evals: list[EvalRun], registry: str | os.PathLike[str] | None) -> str:
    """Verifier-human agreement over the review judgments of the given eval runs (``veriloop
    review``), from ``registry`` or the one beside the last run; empty when nobody judged them."""
    if not evals:
        return ""
    path = Path(registry) if registry is not None else default_registry_path(evals[-1].path)
    judgments = JudgmentStore(path).latest(str(run.path.resolve()) for run in evals) if path.is_file() else []
    if not judgments:
        return ""
    return "<h2>Verifier review (spot checks)</h2>" + agreement_html(agreement(judgments))


_STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
h1{font-size:1.6em}h2{margin-top:1.8em;border-bottom:1px solid #ddd;padding-bottom:.2em}
table{border-collapse:collapse;margin:.5em 0;font-size:.9em}td,th{border:1px solid #ddd;padding:.3em .6em;text-align:left}
th{background:#f3f3f3}.ci{color:#777;font-size:.85em}.up{color:#1a7f37}.down{color:#c62828}
.plot svg{max-width:100%;height:auto}pre{white-space:pre-wrap;word-break:break-word;background:#f7f7f7;padding:.5em;margin:.2em 0 .6em}
.failure{border-left:3px solid #c62828;padding-left:.8em;margin:1em 0}.meta{font-weight:600}.label{color:#777;font-size:.8em}
.feedback{background:#fff4f4}.headline{font-size:1.15em;font-weight:600;border:2px solid #555;background:#f7f7f7;padding:.8em 1em;margin:1em 0}
"""


def render_report(
    paths: Sequence[str | os.PathLike[str]],
    *,
    registry: str | os.PathLike[str] | None = None,
    failures_per_domain: int = 3,
    title: str = "veriloop evaluation report",
    headline: str | None = None,
) -> str:
    """The report's HTML for eval directories and training run directories (in the order given);
    ``headline`` (plain text: the result in one sentence) is the first thing on the page."""
    if not paths:
        raise UserError("give at least one eval directory or training run directory")
    evals, training = _load_inputs(paths)
    points = _trend_points(evals, registry)
    body = [f"<div class=headline>{escape(headline)}</div>"] if headline else []
    body.append(f"<h1>{escape(title)}</h1>")
    if points:
        body += [_runs_section(points), _plots_section(points)]
    if training:
        body.append("<h2>Training reward</h2><div class=plot>" + reward_curves(training) + "</div>")
        body.append(_domain_training_section(training))
        body.append(_utilisation_section(training))
    body.append(_comparison_section(evals))
    body.append(_review_section(evals, registry))
    if evals:
        body.append(_failures_section(evals[-1], failures_per_domain))
    return (
        f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>{escape(title)}</title>"
        f"<style>{_STYLE}</style></head><body>{''.join(body)}</body></html>\n"
    )


def write_report(paths: Sequence[str | os.PathLike[str]], out: str | os.PathLike[str], **options: Any) -> Path:
    """Render the report (see ``render_report``) and write it atomically to ``out``."""
    html = render_report(paths, **options)
    with atomic_write(out) as handle:
        handle.write(html)
    return Path(out)
