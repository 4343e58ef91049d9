"""Tasks and helpers shared by the code verifier tests, as fixtures (tests import nothing
from here). Everything runs in the real sandbox."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from veriloop.core import Response, Score, Task
from veriloop.verifiers import verify

# A data-only suite (literal calls compared to literals): graded on the host from plain results.
LITERAL_TESTS = """
def check(candidate):
    assert candidate(2, 3) == 5
    assert candidate(-1, 1) == 0
    assert candidate(10, 5) == 15
    assert candidate(0, 0) == 0
"""

# Ordinary test code (a loop, computed expectations): run in its own test process.
CODED_TESTS = """
import math

def check(candidate):
    for a in range(3):
        assert candidate(a, 2 * a + 1) == 3 * a + 1
    assert math.isclose(candidate(0.5, 0.25), 0.75)
"""

ADD_PROMPT = '''def add(a, b):
    """Return the sum of a and b.
    >>> add(1, 2)
    3
    >>> add(4, 4)
    8
    """
'''

GOLD_ADD = "    return a + b\n"


def add_task(tests: str = LITERAL_TESTS, task_id: str = "add", **verifier) -> Task:
    """A python_tests task for ``add(a, b)``, prompt code as HumanEval writes it."""
    spec = {"kind": "python_tests", "entry_point": "add", "tests": tests, "prompt_code": ADD_PROMPT, "timeout_s": 2}
    return Task(id=task_id, domain="code", prompt=ADD_PROMPT, verifier={**spec, **verifier}, gold=GOLD_ADD)


def fenced(code: str) -> str:
    return f"Here is my solution.\n```python\n{code.strip()}\n```\n"


def score(task: Task, response: str) -> Score:
    return verify(task, Response(id="r", task_id=task.id, response=response))


@pytest.fixture
def code() -> SimpleNamespace:
    """The helpers and constants above, for tests: ``code.add_task(...)``, ``code.score(...)``."""
    return SimpleNamespace(
        LITERAL_TESTS=LITERAL_TESTS,
        CODED_TESTS=CODED_TESTS,
        ADD_PROMPT=ADD_PROMPT,
        GOLD_ADD=GOLD_ADD,
        add_task=add_task,
        fenced=fenced,
        score=score,
    )


@pytest.fixture(params=["literal", "coded"])
def any_add_task(request) -> Task:
    """The add task with either kind of suite, so both grading paths are covered."""
    return add_task(LITERAL_TESTS if request.param == "literal" else CODED_TESTS, task_id=f"add-{request.param}")


@pytest.fixture(scope="session")
def humaneval_tasks() -> list[Task]:
    from veriloop.tasks import import_tasks

    return import_tasks("humaneval")
