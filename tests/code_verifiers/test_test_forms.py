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
    "a helper that raises at its end": """
def expect_equal(got, expected):
    if got == expected:
        return
    raise AssertionError(f"{got!r} != {expected!r}")

def check(candidate):
    expect_equal(candidate(3, 3), 6)
    expect_equal(candidate(2, 3), 5)
    expect_equal(candidate(5, 1), 6)
    expect_equal(candidate(7, 2), 9)
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
    "a script calling check itself and exiting": """
import sys

def check(candidate):
    if candidate(3, 3) != 6:
        raise AssertionError("3 + 3")
    if candidate(2, 3) != 5:
        raise AssertionError("2 + 3")
    if candidate(5, 1) != 6:
        raise AssertionError("5 + 1")
    if candidate(7, 2) != 9:
        raise AssertionError("7 + 2")

check(add)
sys.exit(0)
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
    "a script that exits 1 on a failure": """
import sys

total = add(5, 1)
if total == 6:
    print("ok")
else:
    sys.exit(1)
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
    right, half, wrong = scores(
        task, code.GOLD_ADD, code.fenced(WRONG_ADD), code.fenced("def add(a, b):\n    return 0")
    )
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


def test_a_helper_that_only_records_results_earns_no_case(code):
    tests = (
        "results = []\n\ndef record(value):\n    results.append(value)\n\n"
        "def check(candidate):\n    record(candidate(5, 1))\n    record(candidate(7, 2))\n"
        "    assert results == [6, 9]\n"
    )
    right, wrong = scores(code.add_task(tests, task_id="records"), code.GOLD_ADD, code.fenced(WRONG_ADD))
    assert right.passed and right.reward == 1.0 and "1/1 test cases" in right.detail, right.detail
    assert wrong.status == "scored" and wrong.reward == 0.0, wrong.detail


def test_a_failed_check_says_what_the_test_raised(code):
    task = code.add_task(RAISES_ON_A_WRONG_RESULT["ValueError"], task_id="form-feedback")
    [half] = scores(task, code.fenced(WRONG_ADD))
    assert "add(5, 1) returned 4, expected 6" in half.feedback, half.feedback


def test_an_answer_raising_inside_a_raising_test_fails_its_case_only(code):
    task = code.add_task(RAISES_ON_A_WRONG_RESULT["AssertionError"], task_id="form-candidate-raises")
    program = "def add(a, b):\n    if a == 5:\n        raise AssertionError('add(5, 1) is wrong')\n    return a + b"
    [result] = scores(task, code.fenced(program))
    assert result.status == "scored" and result.reward == 0.75, result.detail


APPLY_PROMPT = (
    "def apply_all(function, items, key=None):\n    '''function(item) for each item, sorted by key when given.'''\n"
)
APPLY_TESTS = """
import math

def square(x):
    return x * x

def check(candidate):
    assert candidate(lambda x: x * 2, [1, 2]) == [2, 4]
    assert candidate(str.upper, ["a", "b"]) == ["A", "B"]
    assert candidate(len, ["ab", ""]) == [2, 0]
    assert candidate(square, [3, -2]) == [9, 4]
    factor = 3
    assert candidate(lambda x: x * factor, [2]) == [6]
    assert candidate(lambda x: math.sqrt(x), [4.0]) == [2.0]
    assert candidate(abs, [-3, 1, -2], key=lambda x: -x) == [3, 2, 1]
    assert candidate(str, [2, 10], key=str) == ["10", "2"]
"""
APPLY_GOLD = (
    "def apply_all(function, items, key=None):\n    done = [function(x) for x in items]\n"
    "    return sorted(done, key=key) if key else done"
)


def apply_task(tests: str = APPLY_TESTS, task_id: str = "apply") -> Task:
    spec = {"kind": "python_tests", "entry_point": "apply_all", "tests": tests, "prompt_code": APPLY_PROMPT}
    return Task(id=task_id, domain="code", prompt=APPLY_PROMPT, verifier=spec, gold=APPLY_GOLD)


def test_functions_the_tests_pass_are_run_in_the_candidates_process(code):
    task = apply_task()
    unsorted = "def apply_all(function, items, key=None):\n    return [function(x) for x in items]"
    right, ignores_key, ignores_function = scores(
        task,
        code.fenced(APPLY_GOLD),
        code.fenced(unsorted),
        code.fenced("def apply_all(f, items, key=None):\n    return items"),
    )
    assert right.status == "scored" and right.passed and right.reward == 1.0, right.detail
    assert ignores_key.status == "scored" and ignores_key.reward == 6 / 8, ignores_key.detail
    assert ignores_function.status == "scored" and ignores_function.reward == 0.0, ignores_function.detail


def test_a_function_the_tests_pass_carries_no_expected_output(code):
    spy = (
        "import marshal, base64\n"
        "def apply_all(function, items, key=None):\n"
        "    code = getattr(function, '__code__', None)\n"
        "    seen = repr(code.co_consts) + repr(function.__globals__) if code else ''\n"
        "    return [seen for _ in items]\n"
    )
    [result] = scores(apply_task(), code.fenced(spy))
    assert result.status == "scored" and result.reward == 0.0, result.detail
    assert "'check'" not in result.feedback and "[2, 4]" not in result.feedback.split("expected")[0], result.feedback


CANNOT_BE_SHIPPED = {
    "functools.partial": (
        "import functools\n\ndef check(candidate):\n    assert candidate(functools.partial(pow, 2), [3]) == [8]\n",
        4,
    ),
    "a lambda calling the function under test": (
        "def check(candidate):\n    assert candidate(len, ['a']) == [1]\n    assert candidate(lambda x: candidate(len, x), [['a']]) == [[1]]\n",
        3,
    ),
}


def _validate(tmp_path, *tasks) -> list[str]:
    """``veriloop tasks validate``'s errors for a file of ``tasks``."""
    from veriloop.core import write_jsonl
    from veriloop.tasks import check_task, check_task_file

    write_jsonl(tmp_path / "tasks.jsonl", list(tasks))
    assert all(check_task(task) is None for task in tasks)  # loading a task set never runs its tests
    return list(check_task_file(tmp_path / "tasks.jsonl", gold=True).errors)


@pytest.mark.parametrize("form", sorted(CANNOT_BE_SHIPPED))
def test_tasks_validate_refuses_a_callable_that_cannot_be_shipped_naming_its_line(form, tmp_path):
    tests, line = CANNOT_BE_SHIPPED[form]
    errors = _validate(tmp_path, apply_task(), apply_task(tests, task_id=f"ship-{form}"))
    assert len(errors) >= 1 and all(": line 2: " in error for error in errors), errors
    assert f"tests line {line} pass an argument to the function" in errors[0], errors


@pytest.mark.parametrize("form", sorted(RAISES_ON_A_WRONG_RESULT))
def test_tasks_validate_accepts_tests_without_asserts(code, form, tmp_path):
    assert _validate(tmp_path, code.add_task(RAISES_ON_A_WRONG_RESULT[form], task_id=f"valid-{form}")) == []


def test_rebuilding_the_tests_functions_is_not_unsafe_behaviour_of_the_answer(code):
    task = apply_task(task_id="apply-audited")
    task = task.model_copy(update={"verifier": {**task.verifier, "unsafe_behaviour_penalty": 1.0}})
    [result] = scores(task, code.fenced(APPLY_GOLD))
    assert result.passed and result.reward == 1.0, result.detail
