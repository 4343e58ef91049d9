"""The work ``veriloop verify`` does per task is done once: the checks that validate a
``python_tests`` task ask their questions of one parse of its code."""

from __future__ import annotations

import ast

from veriloop.core import Task
from veriloop.tasks import check_task

TESTS = """
import math

def check(candidate):
    assert candidate(2, 3) == 5
    assert math.isclose(candidate(0.5, 0.25), 0.75)
"""


def test_a_tasks_tests_are_parsed_once_for_every_check_of_its_config(monkeypatch):
    parsed: list[str] = []
    parse = ast.parse

    def counting(source, *args, **kwargs):
        parsed.append(source)
        return parse(source, *args, **kwargs)

    monkeypatch.setattr(ast, "parse", counting)
    tests = TESTS + "\n# parsed once\n"  # a text no earlier test has parsed
    task = Task(
        id="add",
        domain="code",
        prompt="Write add(a, b).",
        verifier={"kind": "python_tests", "entry_point": "add", "tests": tests, "prompt_code": "import math\n"},
    )
    assert check_task(task) is None  # validates the config and runs the kind's task check
    assert check_task(task) is None  # as a second load of the file, or a verification, would
    assert parsed.count(tests) == 1


def test_a_typo_in_the_tests_is_still_found_after_they_were_checked():
    tests = TESTS.replace("candidate(0.5", "candidat(0.5")
    verifier = {"kind": "python_tests", "entry_point": "add", "tests": tests}
    for _ in range(2):
        problem = check_task(Task(id="typo", domain="code", prompt="p", verifier=verifier))
        assert problem is not None and "name 'candidat' is not defined" in problem
