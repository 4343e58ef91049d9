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


def test_stdio_reads_other_scripts_digits_when_the_task_says_so(code):
    task = stdio_task("3")
    task = task.model_copy(update={"verifier": {**task.verifier, "unicode_digits": True}})
    assert code.score(task, code.fenced("print('\u0663')")).passed
    assert not code.score(task, code.fenced("print('\u0664')")).passed


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


@pytest.mark.e2e
def test_tests_that_cannot_finish_on_a_result_fail_that_sample_only(code):
    tests = "def check(candidate):\n    assert sum(range(candidate(1, 2))) == 3\n    assert candidate(2, 2) == 4\n"
    task = code.add_task(tests, timeout_s=0.5)
    stall = code.fenced("def add(a, b):\n    return 10**15")
    honest, hostile = scores(task, code.GOLD_ADD, stall)
    assert honest.passed
    assert hostile.status == "scored" and hostile.reward == 0.0
    assert "could not finish" in hostile.detail


def test_every_assert_about_a_call_counts(code):
    tests = """
def check(candidate):
    result = candidate(2, 3)
    assert isinstance(result, int)
    assert result == 5
    assert result > 4
"""
    task = code.add_task(tests)
    honest, float_sum, wrong = scores(
        task,
        code.GOLD_ADD,
        code.fenced("def add(a, b):\n    return float(a + b)"),
        code.fenced("def add(a, b):\n    return 0"),
    )
    assert honest.reward == 1.0
    assert float_sum.reward == 2 / 3, float_sum.detail  # counted only the first assert: 0
    assert wrong.reward == 1 / 3, wrong.detail  # isinstance passes; the value asserts fail


SHOWN_EXAMPLES = "    assert candidate(1, 2) == 3\n    assert candidate(4, 4) == 8\n"  # the prompt's doctests


@pytest.mark.parametrize("suite", ["literal", "coded"])
def test_hard_coding_the_prompts_examples_earns_nothing(code, suite):
    tests = (code.LITERAL_TESTS if suite == "literal" else code.CODED_TESTS) + SHOWN_EXAMPLES
    task = code.add_task(tests, task_id=f"shown-{suite}")
    hard_coded = code.fenced("def add(a, b):\n    return {(1, 2): 3, (4, 4): 8}.get((a, b), -1)")
    wrong_on_examples = code.fenced("def add(a, b):\n    return 0 if (a, b) in [(1, 2), (4, 4)] else a + b")
    honest, cheat, near = scores(task, code.GOLD_ADD, hard_coded, wrong_on_examples)
    assert honest.passed and honest.reward == 1.0
    assert cheat.status == "scored" and cheat.reward == 0.0, cheat.detail
    assert not near.passed and 0 < near.reward < 1, near.detail


ONLY_SHOWN = {
    "literal": "def check(candidate):\n" + SHOWN_EXAMPLES,
    "coded": "def check(candidate):\n    for args, want in [((1, 2), 3), ((4, 4), 8)]:\n"
    "        assert candidate(*args) == want\n",
}


@pytest.mark.parametrize("suite", ["literal", "coded"])
def test_hard_coding_earns_nothing_when_every_test_is_a_prompt_example(code, suite):
    task = code.add_task(ONLY_SHOWN[suite], task_id=f"only-shown-{suite}")
    hard_coded = code.fenced("def add(a, b):\n    return {(1, 2): 3, (4, 4): 8}.get((a, b), -1)")
    other_way = code.fenced("def add(a, b):\n    return sum((a, b))")
    honest, different, cheat = scores(task, code.GOLD_ADD, other_way, hard_coded)
    assert honest.passed and honest.reward == 1.0, honest.detail
    assert different.passed and different.reward == 1.0, different.detail
    assert cheat.status == "scored" and cheat.reward == 0.0, cheat.detail
    assert "On an extra test, add(" in cheat.feedback


def test_without_a_gold_solution_a_suite_of_only_examples_counts_them_and_says_so(code):
    from veriloop.verifiers.code._python_tests import ONLY_VISIBLE

    task = code.add_task(ONLY_SHOWN["literal"], task_id="only-shown-no-gold").model_copy(update={"gold": None})
    honest, wrong = scores(task, code.GOLD_ADD, code.fenced("def add(a, b):\n    return a - b"))
    assert honest.passed and honest.reward == 1.0 and ONLY_VISIBLE in honest.detail
    assert wrong.reward == 0.0
    assert ONLY_VISIBLE not in scores(code.add_task(), code.GOLD_ADD)[0].detail


@pytest.mark.e2e
def test_humaneval_answers_hard_coding_the_doctests_earn_no_more_than_returning_none(humaneval_tasks):
    from veriloop.verifiers import exploits_for

    pairs, baseline = [], []
    for task in humaneval_tasks:
        for exploit in exploits_for(task, []):
            if exploit.category == "special_casing":
                pairs.append((task, Response(id=task.id, task_id=task.id, response=exploit.response)))
                baseline.append((task, Response(id=task.id, task_id=task.id, response="    return None\n")))
    assert len(pairs) > 100
    results = verify_many(pairs + baseline, threads=2)
    cheats, nones = results[: len(pairs)], results[len(pairs) :]
    assert all(s.status == "scored" for s in results)

    def passed(score) -> int:  # "k/n test cases passed": the cases that earned credit
        return int(score.detail.split("/")[0])

    earned = {cheat.id for cheat, none in zip(cheats, nones) if passed(cheat) > passed(none)}
    assert not earned  # humaneval/34's one test is its one example: dynamic cases are the hidden ones


def test_humaneval_34_whose_only_test_is_its_example_needs_the_behaviour(humaneval_tasks):
    from veriloop.verifiers import exploits_for

    task = next(task for task in humaneval_tasks if task.id == "humaneval/34")  # unique(l)
    [cheat] = [e.response for e in exploits_for(task, []) if e.category == "special_casing"]
    by_hand = "```python\ndef unique(l):\n    out = []\n    for x in l:\n        if x not in out:\n"
    by_hand += "            out.append(x)\n    return sorted(out)\n```"
    canonical, other, hard_coded = scores(task, task.gold, by_hand, cheat)
    assert canonical.passed and canonical.reward == 1.0, canonical.detail
    assert other.passed and other.reward == 1.0, other.detail
    assert hard_coded.status == "scored" and hard_coded.reward == 0.0, hard_coded.detail


EXPECTS_AN_EXCEPTION = {
    "try/except": """
def check(candidate):
    assert candidate(2, 5) == 7
    try:
        candidate(-1, 5)
        assert False, "negative numbers must be refused"
    except ValueError:
        pass
""",
    "try/except/else": """
def check(candidate):
    assert candidate(2, 5) == 7
    try:
        candidate(-1, 5)
    except ValueError as error:
        assert "negative" in str(error)
    else:
        raise AssertionError("negative numbers must be refused")
""",
    "pytest.raises": """
import pytest

def check(candidate):
    assert candidate(2, 5) == 7
    with pytest.raises(ValueError, match="negative"):
        candidate(-1, 5)
""",
    "assertRaises": """
import unittest

def check(candidate):
    assert candidate(2, 5) == 7
    case = unittest.TestCase()
    case.assertRaises(ValueError, candidate, -1, 5)
""",
}

REFUSES = "def add(a, b):\n    if a < 0:\n        raise {error}('negative numbers are refused')\n    return a + b"


@pytest.mark.parametrize("name", sorted(EXPECTS_AN_EXCEPTION))
def test_tests_expecting_an_exception_pass_an_answer_that_raises_it(code, name):
    task = code.add_task(EXPECTS_AN_EXCEPTION[name], task_id=f"raises-{name}")
    subclass = "class NegativeError(ValueError):\n    pass\n" + REFUSES.format(error="NegativeError")
    honest, own_subclass, no_raise, wrong_type = scores(
        task,
        code.fenced(REFUSES.format(error="ValueError")),
        code.fenced(subclass),
        code.GOLD_ADD,
        code.fenced(REFUSES.format(error="TypeError")),
    )
    assert honest.passed and honest.reward == 1.0, honest.detail
    assert own_subclass.passed, own_subclass.detail
    assert no_raise.status == wrong_type.status == "scored"
    assert no_raise.reward == 0.5 and wrong_type.reward == 0.5, (no_raise.detail, wrong_type.detail)


def test_an_exception_class_of_the_prompt_is_caught_by_the_tests(code):
    prompt = "class Refused(Exception):\n    pass\n\n" + code.ADD_PROMPT
    tests = "def check(candidate):\n    try:\n        candidate(-1, 5)\n        assert False\n    except Refused:\n        pass\n"
    task = code.add_task(tests, task_id="raises-prompt-class", prompt_code=prompt)
    honest, silent = scores(task, code.fenced(REFUSES.format(error="Refused")), code.GOLD_ADD)
    assert honest.passed, honest.detail
    assert silent.reward == 0.0, silent.detail


def sort_task(tests: str, task_id: str) -> Task:
    spec = {"kind": "python_tests", "entry_point": "sort_items", "tests": tests, "timeout_s": 2}
    return Task(id=task_id, domain="code", prompt="def sort_items(items):\n", verifier=spec)


IN_PLACE = "def sort_items(items):\n    items.sort()"
COPY = "def sort_items(items):\n    return sorted(items)"
MUTATES_AND_RETURNS = "def sort_items(items):\n    items.sort()\n    return items"


def test_tests_checking_an_argument_after_the_call_see_it_mutated(code):
    in_place_tests = "def check(candidate):\n    data = [3, 1, 2]\n    candidate(data)\n    assert data == [1, 2, 3]\n"
    task = sort_task(in_place_tests, "in-place")
    honest, copy = scores(task, code.fenced(IN_PLACE), code.fenced(COPY))
    assert honest.passed, honest.detail
    assert copy.reward == 0.0, copy.detail


def test_an_answer_that_mutates_its_argument_fails_tests_that_forbid_it(code):
    keep_tests = (
        "def check(candidate):\n    data = [3, 1, 2]\n    assert candidate(data) == [1, 2, 3]\n"
        "    assert data == [3, 1, 2], 'the input must not change'\n"
    )
    task = sort_task(keep_tests, "keep-input")
    honest, mutating = scores(task, code.fenced(COPY), code.fenced(MUTATES_AND_RETURNS))
    assert honest.passed, honest.detail
    assert not mutating.passed and mutating.reward == 0.5, mutating.detail


def test_call_chains_many_rounds_deep_are_followed(code):
    tests = "def check(candidate):\n    x = 0\n    for step in range(12):\n        x = candidate(x, step)\n    assert x == 66\n"
    task = code.add_task(tests, task_id="deep-chain")
    honest, wrong = scores(task, code.GOLD_ADD, code.fenced("def add(a, b):\n    return a + b + (b == 11)"))
    assert honest.passed, honest.detail
    assert wrong.status == "scored" and wrong.reward == 0.0, wrong.detail


def test_a_chain_the_answer_keeps_going_fails_that_answer(code):
    tests = "def check(candidate):\n    x = 1\n    while x != 0:\n        x = candidate(x, 0)\n    assert x == 0\n"
    task = code.add_task(tests, task_id="endless-chain")
    never_zero = code.fenced("def add(a, b):\n    return a + b + 1")
    [result] = scores(task, never_zero)
    assert result.status == "scored" and result.reward == 0.0 and "rounds" in result.detail


NOT_PLAIN = {
    "generator": (
        "def check(candidate):\n    assert list(candidate(2, 3)) == [2, 3, 4]\n    assert next(iter(candidate(5, 6))) == 5\n",
        "def add(a, b):\n    for n in range(a, b + 2):\n        yield n",
        "def add(a, b):\n    yield a",
    ),
    "closure": (
        "def check(candidate):\n    plus = candidate(2, 3)\n    assert plus(10) == 15\n    assert plus(-5) == 0\n",
        "def add(a, b):\n    return lambda c: a + b + c",
        "def add(a, b):\n    return lambda c: c",
    ),
    "stateful object": (
        "def check(candidate):\n    counter = candidate(2, 3)\n    counter.bump()\n    counter.bump()\n"
        "    assert counter.total() == 7\n    assert len(counter) == 2\n    assert str(counter) == 'Counter(7)'\n",
        "class Counter:\n    def __init__(self, start):\n        self.value, self.steps = start, 0\n"
        "    def bump(self):\n        self.value += 1\n        self.steps += 1\n"
        "    def total(self):\n        return self.value\n    def __len__(self):\n        return self.steps\n"
        "    def __str__(self):\n        return f'Counter({self.value})'\n"
        "def add(a, b):\n    return Counter(a + b)",
        "class Counter:\n    def bump(self):\n        pass\n    def total(self):\n        return 7\n"
        "    def __len__(self):\n        return 0\n    def __str__(self):\n        return 'Counter(5)'\n"
        "def add(a, b):\n    return Counter()",
    ),
}


@pytest.mark.parametrize("name", sorted(NOT_PLAIN))
def test_results_that_are_not_plain_data_are_judged(code, name):
    tests, honest_program, wrong_program = NOT_PLAIN[name]
    task = code.add_task(tests, task_id=f"not-plain-{name}")
    honest, wrong = scores(task, code.fenced(honest_program), code.fenced(wrong_program))
    assert honest.status == "scored" and honest.passed, honest.detail
    assert wrong.status == "scored" and not wrong.passed and wrong.reward < 1, wrong.detail


def test_a_returned_object_never_compares_equal_by_its_own_rules(code):
    tests = "def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(1, 1) != 2\n"
    liar = "class Liar:\n    def __eq__(self, other):\n        return True\n    def __ne__(self, other):\n        return False\n"
    task = code.add_task(tests, task_id="liar")
    [result] = scores(task, code.fenced(liar + "def add(a, b):\n    return Liar()"))
    assert result.status == "scored" and result.reward == 0.5, result.detail  # only `!= 2` holds, by identity


def test_raising_stop_iteration_never_ends_the_tests_loops(code):
    tests = "def check(candidate):\n    assert all(map(lambda pair: candidate(*pair) > 0, [(1, 1), (2, 2)]))\n"
    task = code.add_task(tests, task_id="stop-iteration")
    honest, stopper = scores(task, code.GOLD_ADD, code.fenced("def add(a, b):\n    raise StopIteration"))
    assert honest.passed
    assert stopper.status == "scored" and stopper.reward == 0.0, stopper.detail


def test_an_endless_generator_is_judged_on_its_first_items(code):
    tests = "def check(candidate):\n    items = candidate(2, 3)\n    assert [next(items) for _ in range(3)] == ['xx', 'xx', 'xx']\n"
    task = code.add_task(tests, task_id="endless-generator")
    endless = code.fenced("def add(a, b):\n    while True:\n        yield 'x' * a")
    wrong = code.fenced("def add(a, b):\n    while True:\n        yield 'y' * 1000")
    honest, flood = scores(task, endless, wrong)
    assert honest.passed, honest.detail
    assert flood.status == "scored" and flood.reward == 0.0, flood.detail


BATCH_HOSTILE = {
    "channel forgery": 'import os\nfor fd in range(1, 64):\n    try:\n        os.write(fd, b\'{"i":0,"value":5}\\n\')\n'
    "    except OSError:\n        pass\ndef add(a, b):\n    return None",
    "exit while loading": "import os\nos._exit(0)\ndef add(a, b):\n    return a + b",
    "huge int": "def add(a, b):\n    return 10**6000",
    "stop iteration": "def add(a, b):\n    raise StopIteration",
    "object equal to anything": "class Any:\n    def __eq__(self, other):\n        return True\ndef add(a, b):\n    return Any()",
}


def test_honest_answers_sharing_a_batch_with_hostile_ones_are_scored_alone(code, any_add_task):
    hostile = [code.fenced(program) for program in BATCH_HOSTILE.values()]
    results = scores(any_add_task, code.GOLD_ADD, *hostile, code.GOLD_ADD)
    assert results[0].passed and results[-1].passed
    for name, result in zip(BATCH_HOSTILE, results[1:-1]):
        assert result.status == "scored" and result.reward == 0.0, (name, result.detail)
