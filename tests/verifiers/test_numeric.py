"""The numeric kind: named values, tolerances, answer formats, partial credit and hedging."""

from __future__ import annotations

import pytest

from veriloop.core import Response, Task
from veriloop.tasks import check_task
from veriloop.verifiers import extract_named_values, verify

GOLD = {"revenue": 1234.5, "gross_margin_pct": 12.5, "net_income": -20}


def score(response: str, gold=GOLD, **fields):
    task = Task(id="t", domain="tables", prompt="p", verifier={"kind": "numeric", **fields}, gold=gold)
    return verify(task, Response(id="r", task_id="t", response=response))


@pytest.mark.parametrize(
    "response",
    [
        "revenue: 1234.5\ngross_margin_pct: 12.5\nnet_income: -20",
        "Revenue: $1,234.50\nGross margin (pct): 12.5%\nNet income: (20)",
        "- **revenue**: 1,234.5\n- gross margin pct = 12.50\n- net income: \u221220",
        "| revenue | 1,234.5 |\n| gross margin pct | 12.5 |\n| net income | -20 |",
        '```json\n{"revenue": 1234.5, "gross_margin_pct": "12.5%", "net_income": -20}\n```',
        "Let me think: revenue: 1000?\nFinal answer:\nrevenue: 1234.5\ngross_margin_pct: 12.5\nnet_income: -20",
        "<answer>revenue: 1234.5\ngross_margin_pct: 12.5\nnet_income: -20</answer>",
        str(GOLD),
    ],
)
def test_formats_that_give_every_value(response):
    result = score(response)
    assert result.passed and result.reward == 1.0, result.detail


def test_partial_credit_is_the_fraction_right_and_feedback_names_the_problems():
    result = score("revenue: 1234.5\ngross_margin_pct: 13.5\n")
    assert result.reward == pytest.approx(1 / 3) and not result.passed
    assert "gross_margin_pct: 13.5 is too high" in result.feedback
    assert "net_income: missing" in result.feedback
    assert "12.5" not in result.feedback  # the expected value is not revealed by default
    assert "want 12.5" in result.detail


def test_all_or_nothing_and_reveal_expected():
    result = score(
        "revenue: 1234.5\ngross_margin_pct: 13.5\nnet_income: -20", all_or_nothing=True, reveal_expected=True
    )
    assert result.reward == 0.0 and "(expected 12.5)" in result.feedback


def test_relative_absolute_and_per_name_tolerances():
    answer = "revenue: 1240\ngross_margin_pct: 12.6\nnet_income: -20"
    assert score(answer).reward == pytest.approx(1 / 3)
    assert score(answer, rel_tol=0.01).passed
    assert score(answer, rel_tol=0.001, abs_tol=0.1).reward == pytest.approx(2 / 3)
    tuned = score(answer, tolerances={"revenue": {"rel_tol": 0.01}, "gross_margin_pct": {"abs_tol": 0.2}})
    assert tuned.passed


def test_percent_as_fraction():
    assert score("rate: 12.5%", gold={"rate": 0.125}, percent="as_fraction").passed
    assert not score("rate: 12.5%", gold={"rate": 0.125}).passed


@pytest.mark.parametrize(
    "hedge",
    [
        "revenue: 1234.5 or 1300",
        "revenue: 1200-1300",
        "revenue: 1234.5\nrevenue: 1300",
        '{"revenue": [1234.5, 1300]}',
        "| revenue | 1234.5 | 1300 |",
    ],
)
def test_several_values_for_one_name_earn_nothing(hedge):
    result = score(hedge, gold={"revenue": 1234.5})
    assert result.reward == 0.0 and not result.passed
    assert "one" in result.feedback


def test_repeating_the_same_value_is_fine():
    assert score("revenue: 1234.5\nrevenue: 1,234.50", gold={"revenue": 1234.5}).passed


def test_extra_names_are_ignored_and_names_are_normalised():
    found = extract_named_values("Gross Margin (%): 12\nother: 5", ["gross_margin"])
    assert found == {"gross_margin": [[12.0]]}


def test_gold_must_map_names_to_numbers():
    assert score("x: 1", gold=None).status == "infra_error"
    assert score("x: 1", gold={"x": "abc"}).status == "infra_error"
    assert score("x: 1", gold=None, values={"x": 1}).passed


def test_bad_fields_are_caught_by_validation():
    task = Task(id="t", domain="d", prompt="p", verifier={"kind": "numeric", "rel_tol": -1})
    assert "rel_tol" in check_task(task)
