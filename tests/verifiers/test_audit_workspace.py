"""veriloop audit on workspace_tests tasks: the gold fix passes, tampering with the test run from
the workspace's code or reading the hidden tests fools nothing, and a task whose command is not
pytest is named weak."""

from __future__ import annotations

import pytest

from veriloop.core import Response, Task
from veriloop.verifiers import audit_tasks, exploits_for, verify

INITIAL = {
    "calc/__init__.py": "",
    "calc/ops.py": "def add(a, b):\n    return a - b\n",
}
HIDDEN = {
    "tests/a/test_ops.py": "from calc.ops import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
    "tests/b/test_more.py": (
        "from calc.ops import add\n\n\nclass TestMore:\n    def test_negative(self):\n        assert add(-2, -3) == -5\n"
    ),
}
GOLD = {"workspace": {"calc/ops.py": "def add(a, b):\n    return a + b\n"}}
RUNNER = (
    "import sys\n\n"
    'open(sys.argv[1], \'w\').write(\'<testsuite><testcase classname="x" name="test_x" file="x.py"/></testsuite>\')\n'
)


def _task(**verifier) -> Task:
    return Task(
        id=verifier.pop("id", "calc"),
        domain="terminal",
        prompt="fix add",
        verifier={"kind": "workspace_tests", "files": HIDDEN, **verifier},
        environment="pytest",
        workspace=INITIAL,
        gold=GOLD,
    )


def test_the_audit_tries_tampering_from_the_workspace_and_nothing_passes(env_with_pytest):
    report = audit_tasks([_task()], repeats=1)
    assert not report.gold_failures and not report.weak, report
    rows = {row.category: row for row in report.rows if row.kind == "workspace_tests"}
    assert {"grader_tampering", "channel_forgery", "early_exit", "read_tests"} <= set(rows), rows
    assert all(row.ok and row.max_reward <= 0.5 for row in rows.values()), rows


@pytest.mark.parametrize("number", range(9))
def test_each_tampering_workspace_fails_where_the_fix_would_pass(env_with_pytest, number):
    task = _task()
    exploit = exploits_for(task, [task])[number]
    assert exploit.workspace is not None and exploit.workspace != task.workspace
    score = verify(task, Response(id="r", task_id=task.id, response="", workspace=exploit.workspace))
    assert score.status == "scored" and not score.passed, (exploit.name, score.detail)


def test_a_command_other_than_pytest_is_weak_and_its_verdict_says_why(env_with_pytest):
    runner = {**HIDDEN, "tests/run.py": RUNNER}
    task = _task(id="custom", files=runner, command=["python", "tests/run.py", "{report}"], expected_tests=1)
    report = audit_tasks([task], repeats=1)
    assert len(report.weak) == 1 and "custom: the report comes from the process that runs" in report.weak[0]
    score = verify(task, Response(id="r", task_id=task.id, response="", workspace=INITIAL))
    assert "the report comes from the process that runs the workspace's code" in score.detail, score.detail
