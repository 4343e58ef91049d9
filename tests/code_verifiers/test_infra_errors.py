"""A grader that breaks gives an infra_error with reward None, never a reward of 0."""

import pytest

from veriloop.core import Task


@pytest.mark.parametrize(
    "tests, detail",
    [
        (
            "raise RuntimeError('the test file is broken')\ndef check(candidate):\n    assert candidate(1, 1) == 2\n",
            "the task's tests do not load",
        ),
        ("def check(candidate):\n    assert 1 + 1 == 2\n", "never call add"),
        ("def check(candidate):\n    assert candidate(object(), 2) == 3\n", "tests line 2 pass an argument"),
    ],
)
def test_broken_tests_are_infra_errors(code, tests, detail):
    result = code.score(code.add_task(tests), code.GOLD_ADD)
    assert result.status == "infra_error" and result.reward is None and not result.passed
    assert detail in result.detail


@pytest.mark.e2e
def test_tests_that_hang_are_an_infra_error_not_a_zero(code):
    tests = "def check(candidate):\n    assert candidate(1, 1) == 2\n    while True:\n        pass\n"
    result = code.score(code.add_task(tests, timeout_s=0.5), code.GOLD_ADD)
    assert result.status == "infra_error" and result.reward is None
    assert "test process failed (timeout" in result.detail


def test_dynamic_tests_without_a_gold_solution_are_an_infra_error(code):
    task = code.add_task(suite="dynamic")
    task = Task(**{**task.model_dump(), "gold": None})
    result = code.score(task, code.GOLD_ADD)
    assert result.status == "infra_error" and "need the task's gold solution" in result.detail


def test_a_gold_solution_that_does_not_run_is_an_infra_error_for_dynamic_tests(code):
    task = Task(**{**code.add_task(suite="dynamic").model_dump(), "gold": "def add(a, b) return"})
    result = code.score(task, code.GOLD_ADD)
    assert result.status == "infra_error" and "gold solution does not run" in result.detail


def test_stdio_dynamic_tests_without_gold_are_an_infra_error(code):
    task = Task(
        id="s",
        domain="code",
        prompt="p",
        verifier={"kind": "stdio", "cases": [{"input": "1\n", "output": "1\n"}], "suite": "dynamic"},
    )
    result = code.score(task, "print(input())")
    assert result.status == "infra_error" and result.reward is None
