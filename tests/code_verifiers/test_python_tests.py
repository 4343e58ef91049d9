"""The python_tests kind: partial credit, all-or-nothing, feedback, multi-round tests."""


def test_gold_passes_both_kinds_of_suite(code, any_add_task):
    result = code.score(any_add_task, code.GOLD_ADD)
    assert result.passed and result.reward == 1.0 and "All" in result.feedback


def test_partial_credit_is_the_fraction_of_cases_passed(code, any_add_task):
    result = code.score(any_add_task, code.fenced("def add(a, b):\n    return a + b if a < 2 else 0"))
    assert result.status == "scored" and 0 < result.reward < 1 and not result.passed


def test_all_or_nothing_mode_gives_zero_for_a_partial_answer(code):
    task = code.add_task(scoring="all_or_nothing")
    assert code.score(task, code.fenced("def add(a, b):\n    return a + b if a < 2 else 0")).reward == 0.0
    assert code.score(task, code.GOLD_ADD).reward == 1.0


def test_feedback_names_the_input_the_expected_and_the_got(code, any_add_task):
    result = code.score(any_add_task, code.fenced("def add(a, b):\n    return a - b"))
    assert "add(" in result.feedback and "returned" in result.feedback and "expected" in result.feedback


def test_an_exception_is_reported_with_its_type_and_line(code, any_add_task):
    result = code.score(any_add_task, code.fenced("def add(a, b):\n    return a / 0"))
    assert result.reward == 0.0 and "ZeroDivisionError" in result.feedback and "line" in result.feedback


def test_syntax_error_is_a_zero_with_feedback_not_an_infra_error(code, any_add_task):
    result = code.score(any_add_task, code.fenced("def add(a, b)\n    return a + b"))
    assert result.status == "scored" and result.reward == 0.0
    assert "SyntaxError" in result.feedback


def test_tests_whose_inputs_depend_on_earlier_results_take_more_rounds(code):
    tests = """
def check(candidate):
    first = candidate(1, 2)
    second = candidate(first, first)
    assert second == 6
    assert candidate(second, 1) == 7
"""
    task = code.add_task(tests)
    assert code.score(task, code.GOLD_ADD).reward == 1.0
    assert code.score(task, code.fenced("def add(a, b):\n    return a * b")).reward == 0.0


def test_top_level_asserts_without_a_check_function_are_tests_too(code):
    task = code.add_task(
        "assert add(1, 1) == 2\nassert add(2, 2) == 4\nx = [add(i, i) for i in range(3)]\nassert x == [0, 2, 4]\n"
    )
    assert code.score(task, code.GOLD_ADD).reward == 1.0
    assert code.score(task, code.fenced("def add(a, b):\n    return 2")).reward == 1 / 3


def test_stopping_early_counts_unreached_cases_as_failed(code):
    tests = """
def check(candidate):
    x = candidate(1, 1)
    assert x == 2
    y = candidate(5, 5)
    assert y == 10
    assert candidate(0, 1) == 1
"""
    result = code.score(
        code.add_task(tests),
        code.fenced("def add(a, b):\n    if a == 5:\n        raise ValueError('no fives')\n    return a + b"),
    )
    assert result.status == "scored" and result.reward == 1 / 3
    assert "The tests stopped" in result.feedback and "ValueError: no fives" in result.feedback


def test_an_answer_with_a_dataclass_runs_with_its_own_annotations(code, any_add_task):
    program = (
        "from dataclasses import dataclass\n\n@dataclass\nclass Sum:\n    a: int\n    b: int\n\n"
        "def add(a, b):\n    assert Sum.__annotations__['a'] is int  # not the string 'int'\n"
        "    total = Sum(a, b)\n    return total.a + total.b"
    )
    assert code.score(any_add_task, code.fenced(program)).reward == 1.0
