"""The math kind on equations and inequalities: a boxed equation whose sides state two values
earns nothing, and an interval matches the inequality it stands for, in either direction."""

from __future__ import annotations

import pytest

from veriloop.core import Response, Task
from veriloop.verifiers import verify


def score(response, gold, **fields):
    task = Task(id="t", domain="math", prompt="p", verifier={"kind": "math", **fields}, gold=gold)
    return verify(task, Response(id="r", task_id="t", response=response))


@pytest.mark.parametrize(
    ("response", "gold"),
    [
        ("\\boxed{x = 5 = 7}", "5"),
        ("\\boxed{x = 7 = 5}", "5"),
        ("\\boxed{2+3 = 6}", "5"),
        ("\\boxed{6 = 2+3}", "5"),
        ("\\boxed{5 = 6}", "5"),
        ("\\boxed{6 = 5}", "5"),
        ("The answer is x = 7 = 5", "5"),
        ("\\boxed{\\frac{1}{2} = 0.7}", "0.5"),
        ("\\boxed{y = 2, x = 3 = 4}", "(3, 2)"),
        ("\\boxed{x = 7 \\Rightarrow x = 5}", "5"),
        ("\\boxed{7 &= 5}", "5"),
        ("\\boxed{\\sqrt{25} = 6}", "5"),
        ("\\boxed{2^{10} = 1000}", "1024"),
        ("\\boxed{\\begin{aligned} x &= 7 \\\\ &= 5 \\end{aligned}}", "5"),
    ],
)
def test_an_equation_that_states_two_values_commits_to_neither(response, gold):
    result = score(response, gold)
    assert result.status == "scored" and not result.passed, result.detail
    assert "two different values" in result.detail and "two different values" in result.feedback


@pytest.mark.parametrize(
    ("response", "gold"),
    [
        ("\\boxed{x = 5}", "5"),
        ("\\boxed{x=5=5}", "5"),
        ("\\boxed{2+3 = 5}", "5"),
        ("\\boxed{x = \\frac{10}{2} = 5}", "5"),
        ("\\boxed{x = y = 5}", "5"),
        ("\\boxed{x \\le 5}", "x \\le 5"),
        ("\\boxed{y = 2x + 3}", "y = 2x + 3"),
        ("\\boxed{x^2 = 25 \\Rightarrow x = 5}", "5"),
        ("\\boxed{2x = 10 \\implies x = 5}", "5"),
        ("\\boxed{\\lim_{x \\to 0} f(x) = 5}", "5"),
        ("\\boxed{\\sin 60^\\circ = \\frac{\\sqrt{3}}{2}}", "\\frac{\\sqrt{3}}{2}"),
        ("\\boxed{P(A) = \\frac{1}{2} = 0.5}", "0.5"),
    ],
)
def test_an_equation_whose_values_agree_keeps_its_credit(response, gold):
    result = score(response, gold)
    assert result.passed, result.detail


SAME_SET = [
    ("2 < x \\le 5", "(2, 5]"),
    ("2 < x \\le 5", "x \\in (2, 5]"),
    ("(2, 5]", "2 < x \\le 5"),
    ("(2, 5]", "x \\in (2, 5]"),
    ("x \\in (2, 5]", "(2, 5]"),
    ("x \\ge 3", "[3, \\infty)"),
    ("[3, \\infty)", "x \\ge 3"),
    ("[3, \\infty)", "3 \\le x"),
    ("x\\in[3,\\infty)", "[3, \\infty)"),
    ("x < 2", "(-\\infty, 2)"),
    ("(-\\infty, 2)", "x < 2"),
    ("(-\\infty, 2) \\cup (3, \\infty)", "x < 2 \\text{ or } x > 3"),
    ("x < 2 \\text{ or } x > 3", "(-\\infty, 2) \\cup (3, \\infty)"),
    ("x < 2 \\text{ or } x > 3", "x \\in (-\\infty, 2) \\cup (3, \\infty)"),
    ("(2, 5)", "x > 2 \\text{ and } x < 5"),
]


@pytest.mark.parametrize(("gold", "answer"), SAME_SET)
def test_an_interval_and_its_inequality_are_one_answer(gold, answer):
    result = score(f"\\boxed{{{answer}}}", gold)
    assert result.passed, result.detail


OTHER_SET = [
    ("2 < x \\le 5", "(2, 5)"),
    ("2 < x \\le 5", "[2, 5]"),
    ("2 < x \\le 5", "(2, 6]"),
    ("(2, 5]", "2 \\le x \\le 5"),
    ("x \\ge 3", "(3, \\infty)"),
    ("x \\ge 3", "x > 3"),
    ("[3, \\infty)", "x \\le 3"),
    ("2 < x \\le 5", "y \\in (2, 5]"),
    ("2 < x \\le 5", "\\{3, 4, 5\\}"),
    ("(-\\infty, 2) \\cup (3, \\infty)", "x < 2 \\text{ and } x > 3"),
    ("(2, 5)", "x > 2 \\text{ or } x < 5"),
]


@pytest.mark.parametrize(("gold", "answer"), OTHER_SET)
def test_another_interval_or_variable_is_still_wrong(gold, answer):
    result = score(f"\\boxed{{{answer}}}", gold)
    assert result.status == "scored" and not result.passed, result.detail


def test_a_megabyte_line_of_digits_is_scored_not_timed_out():
    result = score("9" * (1 << 20), "42")
    assert result.status == "scored" and result.reward == 0.0, result.detail
