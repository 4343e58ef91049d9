"""``terminal-jsonl``: hand-written repository tasks, and line-numbered errors for bad rows."""

from __future__ import annotations

import json

import pytest

from veriloop.core import RowErrors, Task
from veriloop.tasks import import_tasks
from veriloop.tasks.importers._terminal import terminal_task_fields
from veriloop.verifiers import VERIFIERS

READY = "workspace" in Task.model_fields and "workspace_tests" in VERIFIERS.names()
needs_workspace_tasks = pytest.mark.skipif(
    not READY, reason="Task.workspace and the workspace_tests verifier are not in this checkout yet"
)

ROW = {
    "id": "fix-sum",
    "prompt": "Make tests/test_total.py pass.",
    "files": {"calc/__init__.py": "", "calc/total.py": "def total(xs):\n    return sum(xs[1:])\n"},
    "hidden_tests": {
        "tests/test_hidden_total.py": "from calc.total import total\n\n\ndef test_total():\n    assert total([1, 2]) == 3\n"
    },
}


def fields(**changes):
    return terminal_task_fields({**ROW, **changes}, "mine.jsonl", 4)


def test_a_row_maps_to_the_task_fields_with_defaults():
    task = fields()
    assert task == {
        "id": "fix-sum",
        "domain": "terminal-coding",
        "prompt": ROW["prompt"],
        "environment": "pytest",
        "workspace": ROW["files"],
        "verifier": {
            "kind": "workspace_tests",
            "files": ROW["hidden_tests"],
            "command": ["python", "-m", "pytest", "-q"],
        },
        "gold": None,
        "metadata": {"source": "mine.jsonl", "line": 4},
    }


def test_optional_fields_reach_the_task():
    gold = {"calc/total.py": "def total(xs):\n    return sum(xs)\n"}
    task = fields(
        id=7, command=["pytest", "-x"], environment="py312", gold_files=gold, all_or_nothing=False, domain="repo-fix"
    )
    assert task["id"] == "7" and task["domain"] == "repo-fix" and task["environment"] == "py312"
    assert task["verifier"] == {
        "kind": "workspace_tests",
        "files": ROW["hidden_tests"],
        "command": ["pytest", "-x"],
        "all_or_nothing": False,
    }
    assert task["gold"] == {"workspace": gold}


RELATIVE = "must be relative, inside the repository, without '..'"
HIDDEN = "hidden test 'tests/test_hidden_total.py' collides with the"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"hidden_tests": None}, "missing field 'hidden_tests'"),
        ({"hidden_tests": {}}, "field 'hidden_tests': Dictionary should have at least 1 item after validation, not 0"),
        ({"files": {"/etc/passwd": "x"}}, f"field 'files': path '/etc/passwd' {RELATIVE}"),
        ({"files": {"../up.py": "x"}}, f"field 'files': path '../up.py' {RELATIVE}"),
        ({"gold_files": {"calc/../../x.py": "x"}}, f"field 'gold_files': path 'calc/../../x.py' {RELATIVE}"),
        (
            {"files": {"calc//a.py": "x"}},
            "field 'files': path 'calc//a.py' is not in normal form: write it as 'calc/a.py'",
        ),
        ({"files": {"./calc.py": "x"}}, "field 'files': path './calc.py' is not in normal form: write it as 'calc.py'"),
        ({"files": {"tests/test_hidden_total.py": "x"}}, f"{HIDDEN} workspace file 'tests/test_hidden_total.py'"),
        ({"files": {"tests": "x"}}, f"{HIDDEN} workspace file 'tests'"),
        ({"gold_files": {"tests/test_hidden_total.py": "x"}}, f"{HIDDEN} gold file 'tests/test_hidden_total.py'"),
        ({"command": []}, "field 'command': List should have at least 1 item after validation, not 0"),
        ({"command": ["python", ""]}, "field 'command': every argument must be a non-empty string"),
        ({"all_or_nothing": "yes"}, "field 'all_or_nothing': Input should be a valid boolean"),
        ({"id": True}, "field 'id': must be a non-empty string or an integer"),
        ({"prompt": ""}, "field 'prompt': String should have at least 1 character"),
        ({"files": {"a.py": 3}}, "field 'files.a.py': Input should be a valid string"),
        ({"timeout": 5}, "unknown field 'timeout'"),
    ],
)
def test_bad_rows_say_what_is_wrong(changes, message):
    row = {key: value for key, value in {**ROW, **changes}.items() if value is not None}
    with pytest.raises(ValueError) as caught:
        terminal_task_fields(row, "mine.jsonl", 1)
    assert str(caught.value) == message


def write_rows(path, *rows):
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows))
    return path


def test_every_bad_line_is_named_with_its_file(tmp_path):
    source = write_rows(
        tmp_path / "repos.jsonl",
        ROW,
        {**ROW, "id": "b", "files": {"../x.py": ""}},
        '{"id": "broken',
        {key: value for key, value in ROW.items() if key != "prompt"},
    )
    with pytest.raises(RowErrors) as caught:
        import_tasks("terminal-jsonl", file=source)
    errors = caught.value.errors
    assert (
        f"{source}: line 2: field 'files': path '../x.py' must be relative, inside the repository, without '..'"
        in errors
    )
    assert any(line.startswith(f"{source}: line 3: malformed JSON") for line in errors)
    assert f"{source}: line 4: missing field 'prompt'" in errors


@needs_workspace_tasks
def test_good_rows_become_tasks(tmp_path):
    source = write_rows(tmp_path / "repos.jsonl", ROW, {**ROW, "id": "second", "all_or_nothing": True})
    tasks = import_tasks("terminal-jsonl", file=source)
    assert [task.id for task in tasks] == ["fix-sum", "second"]
    assert tasks[0].workspace == ROW["files"] and tasks[0].environment == "pytest"
    assert tasks[1].verifier["all_or_nothing"] is True and "all_or_nothing" not in tasks[0].verifier


@needs_workspace_tasks
def test_duplicate_ids_are_reported(tmp_path):
    source = write_rows(tmp_path / "repos.jsonl", ROW, ROW)
    with pytest.raises(RowErrors, match="line 2: duplicate id 'fix-sum'"):
        import_tasks("terminal-jsonl", file=source)


@needs_workspace_tasks
def test_the_command_reports_bad_lines_and_exits_2(tmp_path, run_cli):
    source = write_rows(tmp_path / "repos.jsonl", ROW, {**ROW, "id": "b", "hidden_tests": {"calc/total.py": ""}})
    out = tmp_path / "tasks.jsonl"
    result = run_cli("tasks", "import", "terminal-jsonl", str(source), "--out", str(out), "--skip-gold-check")
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"error: {source}: line 2: hidden test 'calc/total.py' collides with the workspace file 'calc/total.py'"
    ]
    assert not out.exists()
