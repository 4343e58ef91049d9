"""Tampering signatures stay in step with the exploit catalogue, and leave ordinary code alone."""

from __future__ import annotations

import pytest

from veriloop.core import Task
from veriloop.verifiers import exploits_for
from veriloop.verifiers.audit._signatures import SIGNATURES, tampering_signs

CODE_CATEGORIES = {s.category for s in SIGNATURES}

PROMPT = 'def add(a, b):\n    """Add two numbers.\n    >>> add(2, 3)\n    5\n    """\n'
FUNCTION_TASK = Task(
    id="add",
    domain="code",
    prompt=PROMPT,
    verifier={"kind": "python_tests", "entry_point": "add", "tests": "assert add(2, 3) == 5", "prompt_code": PROMPT},
    gold="def add(a, b):\n    return a + b\n",
)
PROGRAM_TASK = Task(
    id="echo",
    domain="code",
    prompt="Print the sum of the two numbers on stdin. Example: 2 3",
    verifier={"kind": "stdio", "cases": [{"input": "2 3", "output": "5"}, {"input": "4 4", "output": "8"}]},
    gold="```python\na, b = map(int, input().split())\nprint(a + b)\n```",
)


@pytest.mark.parametrize("task", [FUNCTION_TASK, PROGRAM_TASK], ids=["python_tests", "stdio"])
def test_every_code_exploit_matches_a_signature_of_its_category(task):
    exploits = [e for e in exploits_for(task, []) if e.category in CODE_CATEGORIES]
    assert {e.category for e in exploits} >= {"early_exit", "grader_tampering", "channel_forgery", "read_tests"}
    for exploit in exploits:
        categories = {s.category for s in tampering_signs(exploit.response)}
        assert exploit.category in categories, (exploit.name, categories)


def test_ordinary_solutions_match_nothing():
    for text in (
        "def add(a, b):\n    return a + b\n",
        "```python\na, b = map(int, input().split())\nprint(a + b)\n```",
        "The answer is 42.",
        "def __eq__(self, other):\n    return self.value == other.value\n",
        "while True:\n    line = input()\n    if not line:\n        break\n",
    ):
        assert tampering_signs(text) == [], text


def test_each_signature_is_named_once_per_text():
    text = "import os\nos._exit(0)\nos._exit(1)\nsys.settrace(None)"
    assert [s.name for s in tampering_signs(text)] == ["os._exit", "tracing or profiling hook"]
