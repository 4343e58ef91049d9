"""python_tests and stdio judge what the tests say: every assert, exact integers, expected
exceptions, mutated arguments, values that are not plain data, huge values, and examples
visible in the prompt that earn nothing. Each attack has its honest counterpart."""

import pytest

from veriloop.core import Response, Task
from veriloop.verifiers import verify_many


def stdio_task(output: str, compare: str = "numbers") -> Task:
    spec = {"kind": "stdio", "cases": [{"input": "", "output": output}], "compare": compare, "timeout_s": 2}
    return Task(id="print", domain="code", prompt="print the number", verifier=spec, gold=f"print({output!r})")


BIG = "1" + "0" * 5000


@pytest.mark.parametrize(
    "expected, printed, passes",
    [
        ("1000000000000", "1000000000001", False),  # within rel_tol 1e-6, but another integer
        ("1000000000000", "1000000000001.0", False),
        (BIG, BIG[:-1] + "1", False),  # past int()'s digit limit: compared as text, exactly
        (BIG, BIG, True),
        (BIG, "+" + BIG, True),
        ("1000000000000", "1000000000000", True),
        ("6", "6.0000000001", True),
        ("0.333333", "0.3333333", True),
        ("3", "\u0663", False),  # ARABIC-INDIC DIGIT THREE: float() reads it as 3
        ("1000", "1_000", False),
        ("1e999", "inf", False),
    ],
)
def test_stdio_numbers_mode_compares_integers_exactly_and_reads_ascii_digits_only(code, expected, printed, passes):
    program = f"import sys\nsys.set_int_max_str_digits(0)\nprint({printed!r})"
    result = code.score(stdio_task(expected), code.fenced(program))
    assert result.status == "scored" and result.passed is passes, result.detail


def scores(task: Task, *programs: str) -> list:
    """Scores of several programs for one task, verified together in one batch."""
    pairs = [(task, Response(id=f"r{i}", task_id=task.id, response=p)) for i, p in enumerate(programs)]
    return verify_many(pairs, threads=1)


def test_dynamic_tests_compare_large_integers_exactly(code):
    task = code.add_task(suite="dynamic", inputs=[[10**12, 1], [10**13, 7]], dynamic_cases=6)
    off_by_one = code.fenced("def add(a, b):\n    return a + b + (1 if a > 10**9 else 0)")
    gold, wrong = scores(task, code.GOLD_ADD, off_by_one)
    assert gold.passed and gold.reward == 1.0
    assert wrong.status == "scored" and wrong.reward < 0.5, wrong.detail


HUGE_VALUES = {
    "int past the digit limit": "return 10**5000",
    "nested huge int": "return [a, {b: 10**5000}]",
    "overflowing float": "return 1e308 * 10",
    "int too large for a float": "return float(10**400)",
    "string of a million characters": "return 'x' * 10**6",
}


def test_huge_values_fail_their_sample_and_spoil_no_other_in_the_batch(code, any_add_task):
    hostile = [code.fenced(f"def add(a, b):\n    {body}") for body in HUGE_VALUES.values()]
    honest, *others = scores(any_add_task, code.GOLD_ADD, *hostile, code.GOLD_ADD)
    assert honest.passed and others[-1].passed
    for name, result in zip(HUGE_VALUES, others[:-1]):
        assert result.status == "scored" and result.reward == 0.0, (name, result.detail)


def test_tests_that_cannot_finish_on_a_result_fail_that_sample_only(code):
    tests = "def check(candidate):\n    assert sum(range(candidate(1, 2))) == 3\n    assert candidate(2, 2) == 4\n"
    task = code.add_task(tests, timeout_s=0.5)
    stall = code.fenced("def add(a, b):\n    return 10**15")
    honest, hostile = scores(task, code.GOLD_ADD, stall)
    assert honest.passed
    assert hostile.status == "scored" and hostile.reward == 0.0
    assert "could not finish" in hostile.detail
