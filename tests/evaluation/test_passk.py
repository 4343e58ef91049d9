"""pass@k against hand-computed values, and the coverage of the pass@1 interval on simulated draws."""

from __future__ import annotations

import itertools
import random

import pytest

from veriloop.evaluation import mean_pass_at_k, pass_at_k, pass_rate_interval, summarize, wilson_interval


@pytest.mark.parametrize(
    ("samples", "correct", "k", "expected"),
    [
        (5, 2, 1, 2 / 5),
        (5, 2, 2, 1 - 3 / 10),  # 1 - C(3,2)/C(5,2)
        (5, 2, 3, 1 - 1 / 10),  # 1 - C(3,3)/C(5,3)
        (5, 2, 4, 1.0),  # fewer than 4 failures: every 4-subset holds a pass
        (10, 0, 5, 0.0),
        (10, 1, 5, 1 - 126 / 252),  # 1 - C(9,5)/C(10,5)
        (10, 10, 1, 1.0),
        (200, 3, 100, 1 - (100 * 99 * 98) / (200 * 199 * 198)),  # 1 - C(197,100)/C(200,100)
    ],
)
def test_pass_at_k_hand_computed(samples, correct, k, expected):
    assert pass_at_k(samples, correct, k) == pytest.approx(expected, abs=1e-12)


def test_pass_at_k_equals_enumerating_every_subset():
    for samples in range(1, 7):
        for correct in range(samples + 1):
            outcomes = [True] * correct + [False] * (samples - correct)
            for k in range(1, samples + 1):
                subsets = list(itertools.combinations(outcomes, k))
                assert pass_at_k(samples, correct, k) == pytest.approx(sum(any(s) for s in subsets) / len(subsets))


def test_pass_at_k_rejects_k_beyond_samples():
    with pytest.raises(ValueError, match="1 <= k <= samples"):
        pass_at_k(3, 1, 4)


def test_mean_over_tasks_skips_tasks_with_too_few_samples():
    counts = [(4, 1), (4, 4), (2, 0)]
    assert mean_pass_at_k(counts, 1) == pytest.approx((0.25 + 1 + 0) / 3)
    assert mean_pass_at_k(counts, 3) == pytest.approx((0.75 + 1) / 2)  # pass@3 of (4, 1) is 1 - 1/4
    assert mean_pass_at_k(counts, 5) is None


def test_wilson_interval_known_values():
    assert wilson_interval(8, 10) == pytest.approx((0.4902, 0.9433), abs=1e-4)
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert wilson_interval(10, 10)[1] == 1.0


def test_summary_sets_infra_errors_apart():
    from veriloop.evaluation import EvalSample

    def row(task_id, index, passed, status="scored"):
        return EvalSample(
            task_id=task_id,
            domain=task_id[0],
            sample_index=index,
            passed=passed,
            status=status,
            reward=None if status == "infra_error" else float(passed),
            completion_tokens=5,
        )

    rows = [
        row("a1", 0, True),
        row("a1", 1, False),
        row("a1", 2, False, "infra_error"),
        row("b1", 0, False),
        row("b1", 1, True),
        row("b2", 0, False, "infra_error"),
        row("b2", 1, False, "infra_error"),
    ]
    summary = summarize(rows, max_k=3)
    assert summary["pass@1"] == pytest.approx(0.5)  # a1: 1/2 scored, b1: 1/2; b2 has no scored sample
    assert summary["pass@k"] == {"1": 0.5, "2": 1.0}  # no task has 3 scored samples
    assert summary["infra_errors"] == 3 and summary["infra_error_tasks"] == 2
    assert summary["domains"]["b"]["tasks"] == 2 and summary["domains"]["b"]["pass@1"] == pytest.approx(0.5)
    assert summary["tokens"]["completion"] == 35


def _coverage(draw_counts, truth: float, trials: int, seed: int) -> float:
    rng = random.Random(seed)
    hits = 0
    for _ in range(trials):
        low, high = pass_rate_interval(draw_counts(rng))
        hits += low <= truth <= high
    return hits / trials


@pytest.mark.parametrize("rate", [0.1, 0.5, 0.85])
def test_interval_covers_a_simulated_binomial(rate):
    """One sample per task: 100 independent Bernoulli(rate) draws; the 95% interval holds rate ~95% of the time."""
    coverage = _coverage(lambda rng: [(1, int(rng.random() < rate)) for _ in range(100)], rate, trials=1500, seed=7)
    assert 0.92 <= coverage <= 0.98


def test_interval_covers_when_samples_of_a_task_are_correlated():
    """Tasks of varied difficulty, 8 samples each: the clustered interval still covers ~95%,
    while a Wilson interval that treats all 800 samples as independent does not."""

    def draw(rng):
        difficulties = [rng.betavariate(0.4, 0.4) for _ in range(100)]
        return [(8, sum(rng.random() < p for _ in range(8))) for p in difficulties]

    truth = 0.5  # mean of Beta(0.4, 0.4)
    assert 0.92 <= _coverage(draw, truth, trials=800, seed=3) <= 0.98
    rng, naive_hits = random.Random(3), 0
    for _ in range(300):
        counts = draw(rng)
        low, high = wilson_interval(sum(c for _, c in counts), 800)
        naive_hits += low <= truth <= high
    assert naive_hits / 300 < 0.8
