"""Layered verifiers: all_of / weighted, penalties, nested validation, infra errors."""

from __future__ import annotations

import pytest

from veriloop.core import Response, Task
from veriloop.tasks import check_task
from veriloop.verifiers import PENALTIES, verify

MATH = {"kind": "math"}
BOXED_FORMAT = {"kind": "regex", "pattern": r"\\boxed\{", "mode": "search"}
TABLE = {"kind": "numeric", "values": {"a": 1, "b": 2}}


def score(verifier, response, gold="42"):
    task = Task(id="t", domain="d", prompt="p", verifier=verifier, gold=gold)
    return verify(task, Response(id="r", task_id="t", response=response))


@pytest.mark.e2e
def test_all_of_needs_every_check():
    combo = {"kind": "all_of", "checks": [{"verifier": MATH}, {"verifier": BOXED_FORMAT, "label": "format"}]}
    assert score(combo, "\\boxed{42}").passed
    unboxed = score(combo, "The answer is 42")
    assert unboxed.reward == 0.0 and not unboxed.passed
    assert "format: 0" in unboxed.detail and "must match the format" in unboxed.feedback


def test_all_of_min_and_product_of_partial_rewards():
    checks = [{"verifier": TABLE}, {"verifier": {**TABLE, "values": {"a": 1, "b": 2, "c": 3, "d": 4}}}]
    answer = "a: 1\nb: 5\nc: 3\nd: 4"
    assert score({"kind": "all_of", "checks": checks}, answer).reward == pytest.approx(0.5)
    product = score({"kind": "all_of", "checks": checks, "aggregate": "product"}, answer)
    assert product.reward == pytest.approx(0.5 * 0.75)


def test_short_circuit_skips_later_checks():
    combo = {"kind": "all_of", "checks": [{"verifier": BOXED_FORMAT}, {"verifier": MATH}]}
    result = score(combo, "42")
    assert "1 later check(s) skipped" in result.detail
    full = score({**combo, "short_circuit": False}, "42")
    assert "skipped" not in full.detail and full.reward == 0.0


def test_weighted_mean_and_threshold():
    combo = {"kind": "weighted", "checks": [{"verifier": MATH, "weight": 3}, {"verifier": BOXED_FORMAT, "weight": 1}]}
    assert score(combo, "The answer is 42").reward == pytest.approx(0.75)
    assert not score(combo, "The answer is 42").passed
    assert score({**combo, "pass_threshold": 0.7}, "The answer is 42").passed
    assert score(combo, "\\boxed{41}").reward == pytest.approx(0.25)


def test_per_check_gold():
    combo = {
        "kind": "all_of",
        "checks": [{"verifier": MATH, "gold": "7"}, {"verifier": {"kind": "exact"}, "gold": "7"}],
    }
    assert score(combo, "7", gold=None).passed


def test_penalties_subtract_and_fail():
    combo = {
        "kind": "all_of",
        "checks": [{"verifier": MATH}],
        "penalties": [{"kind": "too_long", "max_chars": 40, "amount": 0.3}],
    }
    short = score(combo, "\\boxed{42}")
    assert short.passed and short.reward == 1.0
    long = score(combo, "Let me think about this for a long while... \\boxed{42}")
    assert long.reward == pytest.approx(0.7) and not long.passed
    assert "too_long" in long.detail and "limit is 40" in long.feedback


def test_no_final_answer_penalty():
    combo = {"kind": "weighted", "checks": [{"verifier": MATH}], "penalties": [{"kind": "no_final_answer"}]}
    assert score(combo, "So it is 42").reward == pytest.approx(0.5)
    assert score(combo, "\\boxed{42}").reward == 1.0
    assert score(combo, "<answer>42</answer>").reward == 1.0


def test_a_fatal_unsafe_pattern_skips_the_checks():
    combo = {
        "kind": "all_of",
        "checks": [{"verifier": MATH}],
        "penalties": [{"kind": "unsafe_pattern", "fatal": True}],
        "floor": -1.0,
    }
    result = score(combo, "import subprocess; subprocess.run(['rm', '-rf', '/'])\n\\boxed{42}")
    assert result.reward == -1.0 and not result.passed
    assert "checks skipped" in result.detail and "subprocess" in result.feedback
    assert score(combo, "\\boxed{42}").passed


def test_nested_combinations():
    inner = {"kind": "all_of", "checks": [{"verifier": MATH}, {"verifier": BOXED_FORMAT}]}
    outer = {"kind": "weighted", "checks": [{"verifier": inner, "weight": 2}, {"verifier": TABLE}]}
    assert score(outer, "\\boxed{42}").reward == pytest.approx(2 / 3)


@pytest.mark.parametrize(
    ("verifier", "message"),
    [
        ({"kind": "all_of", "checks": []}, "checks"),
        ({"kind": "all_of", "checks": [{"verifier": {"kind": "telepathy"}}]}, "unknown verifier kind 'telepathy'"),
        ({"kind": "all_of", "checks": [{"verifier": {"kind": "regex", "pattern": "("}}]}, "not a valid regular"),
        ({"kind": "weighted", "checks": [{"verifier": MATH, "weight": 0}]}, "add up to 0"),
        ({"kind": "all_of", "checks": [{"verifier": MATH}], "penalties": [{"kind": "shouting"}]}, "unknown penalty"),
        ({"kind": "all_of", "checks": [{"verifier": MATH}], "penalties": [{"kind": "too_long"}]}, "max_chars"),
    ],
)
def test_bad_parts_are_reported_by_validation(verifier, message):
    problem = check_task(Task(id="t", domain="d", prompt="p", verifier=verifier))
    assert problem is not None and message in problem


def test_a_broken_sub_check_makes_the_whole_score_an_infra_error():
    combo = {"kind": "all_of", "checks": [{"verifier": {"kind": "exact"}, "label": "needs-gold"}]}
    result = score(combo, "x", gold=None)
    assert result.status == "infra_error" and result.reward is None
    assert "check needs-gold" in result.detail


def test_penalty_kinds_are_registered():
    assert {"too_long", "no_final_answer", "unsafe_pattern"} <= set(PENALTIES.names())
