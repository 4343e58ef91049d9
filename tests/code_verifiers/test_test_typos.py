"""A python_tests test that uses a name nothing defines is a mistake in the task, reported at
validation with its line, never a case silently dropped (which would pay a wrong answer)."""

from __future__ import annotations

import json

import pytest

from veriloop.core import Task
from veriloop.tasks import check_task


def _task(tests: str, prompt_code: str = "") -> Task:
    verifier = {"kind": "python_tests", "entry_point": "add", "tests": tests, "prompt_code": prompt_code}
    return Task(id="t", domain="code", prompt="p", verifier=verifier)


@pytest.mark.parametrize(
    ("tests", "name", "line"),
    [
        ("assert add(1, 2) == 3\nassert ad(2, 2) == 4\n", "ad", 2),
        ("def check(candidate):\n    assert candidat(1, 1) == 2\n", "candidat", 2),
        ("assert add(1, 1) == expected\n", "expected", 1),
        ("assert math.isclose(add(0.1, 0.2), 0.3)\n", "math", 1),  # used without its import
    ],
)
def test_an_undefined_name_is_a_validation_error_with_its_line(tests, name, line):
    problem = check_task(_task(tests))
    assert problem is not None and f"tests line {line}: name {name!r} is not defined" in problem


@pytest.mark.parametrize(
    ("tests", "prompt_code"),
    [
        ("def check(candidate):\n    assert candidate(1, 1) == 2\n", ""),
        (
            "import math\nfor i in range(3):\n    assert add(i, 1) == i + 1\nassert math.isclose(add(0.1, 0.2), 0.3)\n",
            "",
        ),
        ("assert add(HALF, HALF) == 1\n", "HALF = 0.5\n"),  # a name the prompt's code defines
        ("from math import *\nassert add(pi, 0) == pi\n", ""),  # a star import may define anything
        (
            "xs = [add(i, i) for i in range(3)]\nassert xs == [0, 2, 4]\ntry:\n    add()\nexcept TypeError as e:\n    assert e\n",
            "",
        ),
    ],
)
def test_names_the_tests_or_the_prompt_define_are_fine(tests, prompt_code):
    assert check_task(_task(tests, prompt_code)) is None


def test_tasks_validate_reports_the_typo_and_exits_2(tmp_path, run_cli):
    task = _task("assert add(2, 2) == 4\nassert ad(2, 3) == 5\n").model_dump(mode="json")
    (tmp_path / "t.jsonl").write_text(json.dumps(task) + "\n")
    done = run_cli("tasks", "validate", str(tmp_path / "t.jsonl"))
    assert done.returncode == 2 and "line 1" in done.stderr and "tests line 2: name 'ad' is not defined" in done.stderr


def test_tests_that_import_a_package_need_an_environment_that_has_it():
    tests = "import numpy as np\nassert add(1, 2) == np.int64(3)\n"
    bare = _task(tests)
    problem = check_task(bare)
    assert problem is not None and "tests line 1 imports 'numpy'" in problem and "environment" in problem
    assert check_task(bare.model_copy(update={"environment": "sci"})) is None
    assert check_task(_task("import json\nassert add(1, 2) == json.loads('3')\n")) is None


def test_dynamic_tests_need_a_gold_solution():
    verifier = {"kind": "python_tests", "entry_point": "add", "suite": "dynamic", "inputs": [[1, 2]]}
    task = Task(id="t", domain="code", prompt="p", verifier=verifier)
    assert "needs the task's gold solution" in check_task(task)
    assert check_task(task.model_copy(update={"gold": "def add(a, b):\n    return a + b\n"})) is None
