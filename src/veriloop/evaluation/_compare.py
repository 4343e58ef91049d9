"""Comparing two eval runs: per-domain deltas with paired bootstrap significance.

Runs are paired by task: each task's pass rate (over its scored samples) in run A and in run
B. A domain's delta is the mean of the per-task differences; its interval and p-value come
from resampling the domain's tasks with replacement (the same draw for both runs, so the
pairing is kept). A task *passes* when at least half of its scored samples pass; a task that
passed in A and not in B flipped pass->fail. The gate fails a domain (or the total) whose
pass@1 fell by more than ``max_drop`` with the fall significant (the interval of the delta
lies below zero). With fewer than ``MIN_TASKS`` paired tasks a domain is never called
significant: a bootstrap over so few tasks cannot tell a change from chance.

The gate also fails when the comparison rests on too little: no task scored in both runs, a
share of either run's scored tasks above ``max_missing`` that the other did not score, or a
share of the candidate's samples above ``max_infra`` that are infra errors (a server that was
down gives no evidence that nothing regressed).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from veriloop.evaluation._samples import EvalSample, task_counts

TOTAL = "(all)"
MIN_TASKS = 5
MAX_MISSING = 0.05  # default share of either run's scored tasks the other may lack before the gate fails
MAX_INFRA = 0.05  # default share of the candidate's samples that may be infra errors


@dataclass(frozen=True)
class DomainDelta:
    """pass@1 of one domain (or ``(all)``) in both runs and the paired difference B - A."""

    domain: str
    tasks: int
    a: float
    b: float
    delta: float
    ci_low: float
    ci_high: float
    p_value: float

    @property
    def significant(self) -> bool:
        return self.tasks >= MIN_TASKS and (self.ci_low > 0 or self.ci_high < 0)

    @property
    def direction(self) -> str:
        """``up`` or ``down`` when significant, else ``same``."""
        if not self.significant:
            return "same"
        return "up" if self.delta > 0 else "down"


@dataclass(frozen=True)
class Flip:
    """A task that passed in one run and failed in the other, with B's answer as the example."""

    task_id: str
    domain: str
    a_rate: float
    b_rate: float
    prompt: str
    response: str
    feedback: str


@dataclass(frozen=True)
class Comparison:
    """The outcome of ``compare``: deltas (total first), flips, the seesaw flag, the gate."""

    domains: tuple[DomainDelta, ...]
    pass_to_fail: tuple[Flip, ...]
    fail_to_pass: tuple[Flip, ...]
    only_in_a: int
    only_in_b: int
    confidence: float
    scored_tasks_a: int = 0
    scored_tasks_b: int = 0
    infra_share_b: float = 0.0  # infra-error samples of the candidate over all its samples

    @property
    def total(self) -> DomainDelta:
        return self.domains[0]

    @property
    def seesaw(self) -> bool:
        """One domain rose while another fell, both significantly."""
        directions = {d.direction for d in self.domains[1:]}
        return {"up", "down"} <= directions

    def gate_failures(
        self, max_drop: float, max_missing: float = MAX_MISSING, max_infra: float = MAX_INFRA
    ) -> list[str]:
        """One line per reason the gate fails: too little compared (see the module docstring), or
        a domain (or the total) that fell by more than ``max_drop``, significantly."""
        return [
            *self._coverage_failures(max_missing, max_infra),
            *(
                f"{d.domain}: pass@1 {d.a:.3f} -> {d.b:.3f} ({d.delta:+.3f}, {self.confidence:.0%} CI "
                f"[{d.ci_low:+.3f}, {d.ci_high:+.3f}]) drops more than {max_drop:.3f}"
                for d in self.domains
                if d.significant and d.delta < 0 and -d.delta > max_drop
            ),
        ]

    def _coverage_failures(self, max_missing: float, max_infra: float) -> list[str]:
        if self.total.tasks == 0:
            return ["nothing was compared: no task was scored in both runs"]
        failures = []
        for run, missing, scored, other in (
            ("A", self.only_in_a, self.scored_tasks_a, "B"),
            ("B", self.only_in_b, self.scored_tasks_b, "A"),
        ):
            if scored and missing / scored > max_missing:
                failures.append(
                    f"{missing} of {run}'s {scored} scored tasks ({missing / scored:.0%}) were not scored "
                    f"in {other}: more than {max_missing:.0%} (--max-missing)"
                )
        if self.infra_share_b > max_infra:
            failures.append(
                f"{self.infra_share_b:.0%} of B's samples are infra errors: more than {max_infra:.0%} (--max-infra)"
            )
        return failures

    def to_dict(
        self,
        max_drop: float | None = None,
        examples: int = 5,
        max_missing: float = MAX_MISSING,
        max_infra: float = MAX_INFRA,
    ) -> dict[str, object]:
        result: dict[str, object] = {
            "domains": [{**asdict(d), "significant": d.significant} for d in self.domains],
            "seesaw": self.seesaw,
            "pass_to_fail": len(self.pass_to_fail),
            "fail_to_pass": len(self.fail_to_pass),
            "pass_to_fail_examples": [asdict(f) for f in self.pass_to_fail[:examples]],
            "fail_to_pass_examples": [asdict(f) for f in self.fail_to_pass[:examples]],
            "only_in_a": self.only_in_a,
            "only_in_b": self.only_in_b,
            "scored_tasks_a": self.scored_tasks_a,
            "scored_tasks_b": self.scored_tasks_b,
            "infra_share_b": self.infra_share_b,
            "confidence": self.confidence,
        }
        if max_drop is not None:
            result["gate"] = {
                "max_drop": max_drop,
                "max_missing": max_missing,
                "max_infra": max_infra,
                "failures": self.gate_failures(max_drop, max_missing, max_infra),
            }
        return result


def paired_bootstrap(
    differences: Sequence[float], resamples: int, rng: np.random.Generator, confidence: float
) -> tuple[float, float, float]:
    """``(ci_low, ci_high, p_value)`` of the mean of paired per-task differences.

    Percentile interval; the two-sided p-value is twice the smaller share of resampled means
    on either side of zero (at most 1).
    """
    values = np.asarray(differences, dtype=float)
    if values.size == 0:
        return (0.0, 0.0, 1.0)
    block = max(1, 2_000_000 // values.size)  # resamples drawn at once, to bound memory on large sets
    means = np.concatenate(
        [
            values[rng.integers(0, values.size, size=(min(block, resamples - start), values.size))].mean(axis=1)
            for start in range(0, resamples, block)
        ]
    )  # (R,) mean difference of each resample of the tasks
    tail = (1 - confidence) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    p_value = min(1.0, 2 * min(float((means <= 0).mean()), float((means >= 0).mean())))
    return (float(low), float(high), p_value)


def _rates(samples: Sequence[EvalSample]) -> dict[str, float]:
    return {task_id: c / n for task_id, (n, c) in task_counts(samples).items() if n > 0}


def _flips(
    a: dict[str, float], b: dict[str, float], samples_b: Sequence[EvalSample], domain_of: dict[str, str]
) -> tuple[list[Flip], list[Flip]]:
    example: dict[tuple[str, bool], EvalSample] = {}
    for sample in samples_b:
        if sample.status == "scored":
            example.setdefault((sample.task_id, sample.passed), sample)
    down, up = [], []
    for task_id in sorted(set(a) & set(b)):
        passed_a, passed_b = a[task_id] >= 0.5, b[task_id] >= 0.5
        if passed_a == passed_b:
            continue
        shown = example[(task_id, passed_b)]
        flip = Flip(
            task_id,
            domain_of[task_id],
            round(a[task_id], 6),
            round(b[task_id], 6),
            shown.prompt,
            shown.response,
            shown.feedback or shown.detail,
        )
        (down if passed_a else up).append(flip)
    return down, up


def compare(
    samples_a: Sequence[EvalSample],
    samples_b: Sequence[EvalSample],
    *,
    resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Comparison:
    """Compare run B against baseline A on the tasks both scored."""
    a, b = _rates(samples_a), _rates(samples_b)
    domain_of = {s.task_id: s.domain for s in (*samples_a, *samples_b)}
    common = sorted(set(a) & set(b))
    rng = np.random.default_rng(seed)
    groups: dict[str, list[str]] = {TOTAL: common}
    for task_id in common:
        groups.setdefault(domain_of[task_id], []).append(task_id)
    deltas = []
    for domain in [TOTAL, *sorted(k for k in groups if k != TOTAL)]:
        ids = groups[domain]
        diffs = [b[t] - a[t] for t in ids]
        low, high, p_value = paired_bootstrap(diffs, resamples, rng, confidence)
        mean_a = sum(a[t] for t in ids) / len(ids) if ids else 0.0
        mean_b = sum(b[t] for t in ids) / len(ids) if ids else 0.0
        deltas.append(
            DomainDelta(
                domain,
                len(ids),
                round(mean_a, 6),
                round(mean_b, 6),
                round(mean_b - mean_a, 6),
                round(low, 6),
                round(high, 6),
                round(p_value, 6),
            )
        )
    down, up = _flips(a, b, samples_b, domain_of)
    infra_b = sum(s.status == "infra_error" for s in samples_b)
    return Comparison(
        tuple(deltas),
        tuple(down),
        tuple(up),
        len(set(a) - set(b)),
        len(set(b) - set(a)),
        confidence,
        scored_tasks_a=len(a),
        scored_tasks_b=len(b),
        infra_share_b=round(infra_b / len(samples_b), 6) if samples_b else 0.0,
    )
