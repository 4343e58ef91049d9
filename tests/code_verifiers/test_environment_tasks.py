"""Code kinds run the answer on the task's environment: its packages are importable there only."""

from __future__ import annotations

from veriloop.core import Response, Task
from veriloop.verifiers import verify

USES_PYTEST = "```python\nimport pytest\n\ndef bump(x):\n    return x + 1 if pytest.approx(x) == x else None\n```"
TESTS = "assert bump(1) == 2\nassert bump(41) == 42\n"


def _score(task: Task, text: str):
    return verify(task, Response(id="r", task_id=task.id, response=text))


def test_python_tests_answers_import_the_environments_packages(env_with_pytest):
    verifier = {"kind": "python_tests", "entry_point": "bump", "tests": TESTS}
    on_env = Task(id="env", domain="code", prompt="p", verifier=verifier, environment="pytest")
    bare = Task(id="bare", domain="code", prompt="p", verifier=verifier)
    assert _score(on_env, USES_PYTEST).reward == 1.0
    plain = _score(bare, USES_PYTEST)
    assert plain.reward == 0.0 and "pytest" in plain.detail


def test_stdio_programs_run_on_the_environment(env_with_pytest):
    verifier = {"kind": "stdio", "cases": [{"input": "1\n", "output": "2\n"}, {"input": "5\n", "output": "6\n"}]}
    program = "```python\nimport pytest\nprint(int(input()) + 1)\n```"
    on_env = Task(id="env", domain="code", prompt="p", verifier=verifier, environment="pytest")
    bare = Task(id="bare", domain="code", prompt="p", verifier=verifier)
    assert _score(on_env, program).reward == 1.0
    assert _score(bare, program).reward == 0.0
