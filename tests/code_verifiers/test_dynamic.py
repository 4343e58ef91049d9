"""Dynamic tests: seeded mutations of the task's inputs, judged against the gold solution."""

import random

from veriloop.verifiers.code._dynamic import mutate_calls, mutate_stdin, mutate_value
from veriloop.verifiers.code.sandboxed._wire import call_key, loads_value

VISIBLE_ONLY = "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(4, 4) == 8\n"
SPECIAL_CASED = "def add(a, b):\n    return {(1, 2): 3, (4, 4): 8}.get((a, b), 0)"


def test_fixed_tests_that_only_repeat_the_prompt_examples_get_dynamic_cases_from_the_gold(code):
    result = code.score(code.add_task(VISIBLE_ONLY), code.fenced(SPECIAL_CASED))
    assert result.status == "scored" and result.reward == 0.0, result.detail
    assert code.score(code.add_task(VISIBLE_ONLY), code.GOLD_ADD).reward == 1.0


def test_dynamic_tests_catch_a_solution_that_special_cases_the_visible_examples(code):
    for suite in ("dynamic", "both"):
        result = code.score(code.add_task(VISIBLE_ONLY, suite=suite, dynamic_cases=10), code.fenced(SPECIAL_CASED))
        assert result.status == "scored" and not result.passed and result.reward < 0.5
        assert "On an extra test, add(" in result.feedback and "expected" in result.feedback
        assert code.score(code.add_task(VISIBLE_ONLY, suite=suite, dynamic_cases=10), code.GOLD_ADD).passed


def test_dynamic_inputs_change_with_the_seed_and_repeat_with_it():
    base = [call_key([1, 2], {}), call_key([4, 4], {}), call_key([10, 3], {})]
    first = mutate_calls(base, 10, random.Random("0:t"))
    assert first == mutate_calls(base, 10, random.Random("0:t"))
    assert first != mutate_calls(base, 10, random.Random("1:t"))
    assert len(first) == 10 and not set(first) & set(base)


def test_answers_memorised_for_one_seed_fail_under_another(code):
    task = code.add_task(VISIBLE_ONLY, suite="dynamic", dynamic_cases=8, seed=0)
    inputs = [
        loads_value(key)[0]
        for key in mutate_calls([call_key([1, 2], {}), call_key([4, 4], {})], 16, random.Random(f"0:{task.id}"))
    ]
    table = {tuple(args): sum(args) for args in inputs}
    memorised = code.fenced(f"TABLE = {table!r}\ndef add(a, b):\n    return TABLE.get((a, b), 0)")
    assert code.score(task, memorised).passed
    assert not code.score(code.add_task(VISIBLE_ONLY, suite="dynamic", dynamic_cases=8, seed=7), memorised).passed


def test_a_candidate_that_answers_differently_when_asked_twice_fails_the_property_check(code):
    flaky = code.fenced(
        "import itertools\ncounter = itertools.count()\ndef add(a, b):\n    return a + b + next(counter) % 2"
    )
    result = code.score(code.add_task(VISIBLE_ONLY, suite="dynamic", dynamic_cases=6), flaky)
    assert not result.passed and "gave different results when called twice" in result.feedback


# Right the first time, wrong when asked again; and the harness's comparison of the two
# outcomes, in the candidate's own process, fooled by an outcome that equals anything.
HIDES_THAT_IT_ANSWERS_TWICE = """
import sys
asked = {}

def add(a, b):
    asked[a, b] = asked.get((a, b), 0) + 1
    return a + b if asked[a, b] == 1 else -1

class _Same(dict):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

_harness = next(m for m in list(sys.modules.values()) if callable(getattr(m, "_call", None)))
_call = _harness._call
_harness._call = lambda function, key: _Same(_call(function, key))
"""


def test_the_repeated_call_is_compared_on_the_host_not_in_the_candidates_process(code):
    task = code.add_task(VISIBLE_ONLY, suite="dynamic", dynamic_cases=6)
    result = code.score(task, code.fenced(HIDES_THAT_IT_ANSWERS_TWICE))
    assert result.status == "scored" and result.reward == 0.0, result.detail
    assert "gave different results when called twice" in result.feedback, result.feedback


def test_mutations_stay_in_the_domain_the_inputs_show():
    rng = random.Random(3)
    for _ in range(200):
        assert mutate_value(5, [0, 3, 9], rng) >= 0
        assert mutate_value(5, [1, 3, 9], rng) >= 1
        assert set(mutate_value("abba", ["ab", "ba"], rng)) <= {"a", "b"}
        items = mutate_value([1, 4, 9], [[1, 2, 3], [0, 5]], rng)
        assert items == sorted(items) and len(set(items)) == len(items)
        pair = mutate_value((1, "x"), [(2, "y")], rng)
        assert type(pair) is tuple and len(pair) == 2


def test_stdin_mutations_keep_counts_that_shape_the_input():
    base = ["3\n1 2 3\n", "2\n10 20\n"]
    for text in mutate_stdin(base, 10, random.Random(0)):
        count, numbers = text.split("\n")[:2]
        assert int(count) == len(numbers.split())


def test_correct_alternative_solutions_pass_humaneval_dynamic_tests(humaneval_tasks, code):
    task = humaneval_tasks[0]
    task = task.model_copy(update={"verifier": {**task.verifier, "suite": "both", "dynamic_cases": 15}})
    alternative = code.fenced(
        "def has_close_elements(numbers, threshold):\n"
        "    ordered = sorted(numbers)\n"
        "    return any(b - a < threshold for a, b in zip(ordered, ordered[1:]))"
    )
    result = code.score(task, alternative)
    assert result.passed, result.detail
