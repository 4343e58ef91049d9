"""pass@k and confidence intervals for pass rates.

pass@k is estimated per task with the unbiased estimator of Chen et al. (2021): with ``n``
samples of which ``c`` pass, ``1 - C(n-c, k) / C(n, k)``, the chance that at least one of
``k`` samples drawn without replacement passes. A task set's pass@k is the mean over tasks.

Samples of one task are correlated (an easy task passes in most of its samples), so the
interval for pass@1 is a Wilson score interval on the *effective* number of independent
draws of a clustered design: between the number of tasks (samples of a task perfectly
correlated) and the number of samples (samples independent), estimated from the spread of
the per-task pass rates.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist


def pass_at_k(samples: int, correct: int, k: int) -> float:
    """Unbiased pass@k of one task with ``samples`` draws of which ``correct`` passed.

    Needs ``1 <= k <= samples`` and ``0 <= correct <= samples``.
    """
    if not 1 <= k <= samples:
        raise ValueError(f"pass@{k} needs 1 <= k <= samples ({samples})")
    if not 0 <= correct <= samples:
        raise ValueError(f"correct ({correct}) must lie in [0, samples ({samples})]")
    if samples - correct < k:
        return 1.0
    # 1 - C(n-c, k) / C(n, k) as a product, stable for large n.
    miss = 1.0
    for i in range(samples - correct + 1, samples + 1):
        miss *= 1.0 - k / i
    return 1.0 - miss


def mean_pass_at_k(counts: Sequence[tuple[int, int]], k: int) -> float | None:
    """Mean pass@k over tasks given ``(samples, correct)`` per task.

    Tasks with fewer than ``k`` samples (after infra errors were set aside) are left out;
    None when no task has ``k`` samples.
    """
    values = [pass_at_k(n, c, k) for n, c in counts if n >= k]
    return sum(values) / len(values) if values else None


def _z(confidence: float) -> float:
    if not 0 < confidence < 1:
        raise ValueError("confidence must lie strictly between 0 and 1")
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def wilson_interval(successes: float, trials: float, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (``trials`` may be fractional)."""
    if trials <= 0:
        return (0.0, 1.0)
    z = _z(confidence)
    p = min(max(successes / trials, 0.0), 1.0)
    denominator = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denominator
    low = 0.0 if p == 0.0 else max(0.0, centre - half)
    high = 1.0 if p == 1.0 else min(1.0, centre + half)
    return (low, high)


def effective_trials(counts: Sequence[tuple[int, int]]) -> float:
    """Effective number of independent draws behind the mean per-task pass rate.

    ``p(1-p) / Var(mean rate)``, with the variance estimated from the per-task rates and
    clamped to ``[tasks, samples]``. With one sample per task it equals the number of tasks.
    """
    rates = [c / n for n, c in counts if n > 0]
    tasks, samples = len(rates), sum(n for n, _ in counts if n > 0)
    if tasks < 2:
        return float(tasks)
    p = sum(rates) / tasks
    spread = sum((r - p) ** 2 for r in rates) / (tasks - 1)
    if p in (0.0, 1.0) or spread == 0.0:
        return float(tasks)  # no information on the correlation: assume the worst
    return min(max(p * (1 - p) / (spread / tasks), float(tasks)), float(samples))


def pass_rate_interval(counts: Sequence[tuple[int, int]], confidence: float = 0.95) -> tuple[float, float]:
    """Interval for pass@1 (the mean per-task pass rate) from ``(samples, correct)`` per task."""
    rates = [c / n for n, c in counts if n > 0]
    if not rates:
        return (0.0, 1.0)
    trials = effective_trials(counts)
    return wilson_interval(sum(rates) / len(rates) * trials, trials, confidence)
