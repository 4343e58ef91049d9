"""Honest ways to write python_tests' tests besides ``assert``: raising an exception on a
wrong result, unittest's assert methods and test classes, helpers that raise, pytest-style
test functions, and callables passed to the function under test. A right answer passes, a
wrong one fails (never an infra error), and cases are counted so partial credit is kept.
Everything runs in the real sandbox."""

import pytest

from veriloop.core import Response, Task
from veriloop.verifiers import verify_many

WRONG_ADD = "def add(a, b):\n    return a - b if a > 3 else a + b"
"""Right on small first arguments only: partial credit where cases are counted one by one."""

RAISES_ON_A_WRONG_RESULT = {
    "AssertionError": """
def check(candidate):
    for a, b in [(3, 3), (2, 3), (5, 1), (7, 2)]:
        if candidate(a, b) != a + b:
            raise AssertionError(f"add({a}, {b}) is wrong")
""",
    "ValueError": """
def check(candidate):
    if candidate(3, 3) != 6:
        raise ValueError
    if candidate(2, 3) != 5:
        raise ValueError("wrong")
    if candidate(5, 1) != 6:
        raise ValueError("wrong")
    if not candidate(7, 2) == 9:
        raise ValueError("wrong")
""",
    "Exception at top level": """
got = add(3, 3)
if got != 6:
    raise Exception("wrong: " + str(got))
if add(2, 3) != 5: raise Exception("wrong")
if add(5, 1) != 6: raise Exception("wrong")
if add(7, 2) != 9: raise Exception("wrong")
""",
    "a helper that raises": """
def expect(condition, message):
    if not condition:
        raise RuntimeError(message)

def check(candidate):
    expect(candidate(3, 3) == 6, "small")
    expect(candidate(2, 3) == 5, "small")
    expect(candidate(5, 1) == 6, "large")
    expect(candidate(7, 2) == 9, "large")
""",
    "unittest assert methods in check": """
import unittest

def check(candidate):
    case = unittest.TestCase()
    case.assertEqual(candidate(3, 3), 6)
    case.assertEqual(candidate(2, 3), 5)
    case.assertTrue(candidate(5, 1) == 6)
    case.assertIn(candidate(7, 2), [9])
""",
    "a unittest TestCase class": """
import unittest

class TestAdd(unittest.TestCase):
    def setUp(self):
        self.pairs = [(3, 3, 6), (2, 3, 5)]

    def test_small(self):
        for a, b, total in self.pairs:
            self.assertEqual(add(a, b), total)

    def test_large(self):
        self.assertEqual(add(5, 1), 6)
        self.assertListEqual([add(7, 2)], [9])

if __name__ == "__main__":
    unittest.main()
""",
    "pytest-style test functions": """
def test_small():
    assert add(3, 3) == 6
    assert add(2, 3) == 5

def test_large():
    assert add(5, 1) == 6
    assert add(7, 2) == 9
""",
}

WHOLE_UNIT = {
    "a raise after the checks": """
def check(candidate):
    results = [candidate(3, 3), candidate(2, 3), candidate(5, 1)]
    if results == [6, 5, 6]:
        return
    raise AssertionError("wrong sums: " + repr(results))
""",
    "an else branch that raises": """
def check(candidate):
    total = candidate(5, 1)
    if total == 6:
        pass
    else:
        raise Exception("wrong")
""",
}


def scores(task: Task, *responses: str) -> list:
    pairs = [(task, Response(id=f"r{i}", task_id=task.id, response=r)) for i, r in enumerate(responses)]
    return verify_many(pairs, threads=1)


@pytest.mark.parametrize("form", sorted(RAISES_ON_A_WRONG_RESULT))
def test_tests_without_asserts_count_each_check_as_a_case(code, form):
    task = code.add_task(RAISES_ON_A_WRONG_RESULT[form], task_id=f"form-{form}")
    right, half, wrong = scores(task, code.GOLD_ADD, code.fenced(WRONG_ADD), code.fenced("def add(a, b):\n    return 0"))
    assert right.status == "scored" and right.passed and right.reward == 1.0, right.detail
    assert half.status == "scored" and not half.passed and half.reward == 0.5, half.detail
    assert wrong.status == "scored" and not wrong.passed and wrong.reward == 0.0, wrong.detail
    assert "4 test cases" in right.detail, right.detail


@pytest.mark.parametrize("form", sorted(WHOLE_UNIT))
def test_a_test_that_only_raises_at_its_end_is_one_case(code, form):
    task = code.add_task(WHOLE_UNIT[form], task_id=f"unit-{form}")
    right, wrong = scores(task, code.GOLD_ADD, code.fenced(WRONG_ADD))
    assert right.status == "scored" and right.passed and right.reward == 1.0, right.detail
    assert wrong.status == "scored" and not wrong.passed and wrong.reward == 0.0, wrong.detail
    assert "1/1 test cases passed" in right.detail and "0/1" in wrong.detail, (right.detail, wrong.detail)


def test_a_failed_check_says_what_the_test_raised(code):
    task = code.add_task(RAISES_ON_A_WRONG_RESULT["ValueError"], task_id="form-feedback")
    [half] = scores(task, code.fenced(WRONG_ADD))
    assert "add(5, 1) returned 4, expected 6" in half.feedback, half.feedback


def test_an_answer_raising_inside_a_raising_test_fails_its_case_only(code):
    task = code.add_task(RAISES_ON_A_WRONG_RESULT["AssertionError"], task_id="form-candidate-raises")
    program = "def add(a, b):\n    if a == 5:\n        raise AssertionError('add(5, 1) is wrong')\n    return a + b"
    [result] = scores(task, code.fenced(program))
    assert result.status == "scored" and result.reward == 0.75, result.detail
