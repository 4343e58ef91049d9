"""workspace_checks: file tests and commands on the final workspace; planted files, links and
printed claims earn nothing, and honest work earns full reward (real sandbox, no mocks)."""

from __future__ import annotations

import base64
import io
import json
import tarfile
import time

import pytest

from veriloop.core import Response, Snapshot, Task, inline_form, snapshot_archive
from veriloop.verifiers import verify

INITIAL = {"notes/todo.txt": "ship it\n", "app/config.ini": "[app]\ndebug = true\n"}
FINISHED = {"app/config.ini": "[app]\ndebug = false\n", "report/summary.txt": "total: 3\n"}
READS_THE_SUMMARY = "import sys; sys.exit(0 if open('report/summary.txt').read() == 'total: 3\\n' else 1)"
CHECKS = [
    {"path": "report/summary.txt", "equals": "total: 3\n", "label": "the summary"},
    {"path": "notes/todo.txt", "exists": False},
    {"path": "app/config.ini", "matches": r"(?m)^debug = false$"},
    {"path": "app/config.ini", "contains": "[app]"},
    {"command": ["python", "-I", "-c", READS_THE_SUMMARY], "label": "the summary reads back"},
]


def _task(checks: list[dict], workspace: dict | None = None, **verifier) -> Task:
    return Task(
        id="chores",
        domain="terminal",
        prompt="write the summary, drop the todo file, turn debug off",
        verifier={"kind": "workspace_checks", "checks": checks, **verifier},
        environment="pytest",
        workspace=INITIAL if workspace is None else workspace,
    )


def _score(task: Task, workspace: dict | None):
    return verify(task, Response(id="r", task_id=task.id, response="done", workspace=workspace))


@pytest.fixture(scope="module")
def task(env_with_pytest) -> Task:
    return _task(CHECKS)


def test_the_finished_workspace_passes_and_records_the_environment(task, env_with_pytest):
    score = _score(task, FINISHED)
    assert score.status == "scored" and score.reward == 1.0 and score.passed, score.detail
    assert score.detail == "5/5 checks passed" and score.feedback == ""
    assert score.environment == env_with_pytest.hash


def test_the_initial_workspace_earns_the_fraction_passed_and_feedback_names_the_failures(task):
    score = _score(task, INITIAL)
    assert score.reward == pytest.approx(1 / 5) and not score.passed, score.detail
    for name in ("the summary", "notes/todo.txt", "app/config.ini", "the summary reads back"):
        assert name in score.feedback, score.feedback
    for expected in ("total: 3", "debug = false", "[app]"):
        assert expected not in score.feedback and expected not in score.detail
    assert _score(task, None).reward == score.reward  # no workspace: the initial one is judged


def test_all_or_nothing(env_with_pytest):
    strict = _task(CHECKS, all_or_nothing=True)
    assert _score(strict, INITIAL).reward == 0.0
    assert _score(strict, FINISHED).reward == 1.0


def test_without_a_command_no_environment_is_recorded(env_with_pytest):
    score = _score(_task(CHECKS[:4]), FINISHED)
    assert score.reward == 1.0 and score.environment is None


def _captured(command: str, workspace: dict[str, str]) -> tuple[Snapshot, dict]:
    """What a shell tool call leaves: the sandbox's captured workspace, and the final workspace
    an episode hands the verifier from it."""
    from veriloop.sandbox import Sandbox

    with Sandbox() as sandbox:
        files = {path: text.encode() for path, text in workspace.items()}
        result = sandbox.run(command, snapshot=Snapshot(archive=snapshot_archive(files)), capture=True)
    assert result.ok and result.snapshot is not None, result
    return result.snapshot, inline_form(result.snapshot.files())


def test_a_link_cannot_be_planted(task):
    plant = "mkdir -p report && printf 'total: 3\\n' > real.txt && ln -sf ../real.txt report/summary.txt"
    snapshot, final = _captured(plant, {**FINISHED, "report/summary.txt": "draft\n"})
    with tarfile.open(fileobj=io.BytesIO(snapshot.archive)) as tar:
        captured = {member.name for member in tar}
    assert "real.txt" in captured and "report/summary.txt" not in captured  # only files and folders come back
    assert "report/summary.txt" not in final
    score = _score(task, final)
    assert score.reward == pytest.approx(3 / 5) and "the summary" in score.feedback, score.detail


def test_a_file_of_the_same_name_in_another_folder_does_not_count(task):
    elsewhere = {k: v for k, v in FINISHED.items() if k != "report/summary.txt"}
    elsewhere |= {"summary.txt": "total: 3\n", "old/report/summary.txt": "total: 3\n"}
    score = _score(task, elsewhere)
    assert score.reward == pytest.approx(3 / 5), score.detail
    assert "the summary (absent)" in score.detail


def test_a_folder_at_the_path_is_not_the_file(env_with_pytest):
    present = _task([{"path": "report/summary.txt", "exists": True}])
    assert _score(present, {"report/summary.txt/inner": "x"}).reward == 0.0
    assert _score(present, {"report/summary.txt": ""}).reward == 1.0


def test_equals_compares_bytes_and_matches_needs_utf8_text(env_with_pytest):
    equal = _task([{"path": "out.txt", "equals": "done"}])
    assert _score(equal, {"out.txt": "done\n"}).reward == 0.0
    assert _score(equal, {"out.txt": "done"}).reward == 1.0
    matching = _task([{"path": "out.bin", "matches": "done"}])
    binary = {"out.bin": {"base64": base64.b64encode(b"done \xff").decode()}}
    score = _score(matching, binary)
    assert score.reward == 0.0 and "not UTF-8 text" in score.detail


@pytest.mark.e2e
def test_a_catastrophic_pattern_fails_within_its_time_limit(env_with_pytest):
    from veriloop.verifiers.workspace._workspace_checks import MATCH_TIMEOUT_S

    backtracking = _task([{"path": "out.txt", "matches": r"^(a+)+$"}])
    started = time.monotonic()
    score = _score(backtracking, {"out.txt": "a" * 40 + "b"})
    assert score.status == "scored" and score.reward == 0.0 and "was stopped" in score.detail, score.detail
    assert time.monotonic() - started < MATCH_TIMEOUT_S + 30
    assert _score(backtracking, {"out.txt": "aaaa"}).reward == 1.0


RUNS_THE_SOLUTION = [{"command": ["python", "solution.py"], "label": "the solution runs", "timeout_s": 3}]


def test_printing_ok_while_exiting_non_zero_fails(env_with_pytest):
    solution = _task(RUNS_THE_SOLUTION)
    liar = "import sys\nprint('OK')\nprint('1/1 checks passed')\nsys.exit(1)\n"
    score = _score(solution, {"solution.py": liar})
    assert score.reward == 0.0 and "exit code 1, expected 0" in score.detail, score.detail
    assert _score(solution, {"solution.py": "print('hello')\n"}).reward == 1.0


def test_the_expected_exit_code_is_the_one_that_passes(env_with_pytest):
    rejects = _task([{"command": ["python", "solution.py", "--bad-flag"], "exit_code": 2}])
    strict = "import sys\nsys.exit(2 if '--bad-flag' in sys.argv else 0)\n"
    assert _score(rejects, {"solution.py": strict}).reward == 1.0
    assert _score(rejects, {"solution.py": "pass\n"}).reward == 0.0


@pytest.mark.e2e
def test_a_command_that_never_ends_fails_within_its_timeout(env_with_pytest):
    started = time.monotonic()
    score = _score(_task(RUNS_THE_SOLUTION), {"solution.py": "while True:\n    pass\n"})
    assert score.status == "scored" and score.reward == 0.0 and "ran past 3 s" in score.detail, score.detail
    assert time.monotonic() - started < 30


def test_a_planted_program_on_the_commands_name_is_not_run(env_with_pytest):
    ready = "import sys; sys.exit(0 if open('data.txt').read() == 'ready' else 1)"
    checks = [
        {"command": ["python", "-I", "-c", ready], "label": "data ready"},
        {"command": ["sh", "-c", 'case ":$PATH:" in *:/workspace*|*::*|*:.:*) exit 1;; esac'], "label": "PATH"},
    ]
    planted = {name: "#!/bin/sh\nexit 0\n" for name in ("python", "bin/python", ".venv/bin/python", "sh", "bin/sh")}
    task = _task(checks)
    score = _score(task, {**planted, "data.txt": "not yet"})
    assert score.reward == pytest.approx(1 / 2) and "data ready" in score.feedback, score.detail
    assert _score(task, {**planted, "data.txt": "ready"}).reward == 1.0


def test_an_isolated_python_does_not_import_a_planted_module(env_with_pytest):
    reads = "import json, sys; sys.exit(0 if json.load(open('out.json'))['n'] == 3 else 1)"
    task = _task([{"command": ["python", "-I", "-c", reads]}])
    planted = {"json.py": "import os\nos._exit(0)\n", "json/__init__.py": "import os\nos._exit(0)\n"}
    assert _score(task, {**planted, "out.json": json.dumps({"n": 2})}).reward == 0.0
    assert _score(task, {"out.json": json.dumps({"n": 3})}).reward == 1.0


def test_a_command_the_environment_lacks_is_a_grader_error(env_with_pytest):
    score = _score(_task([{"command": ["no-such-program"]}]), FINISHED)
    assert score.status == "infra_error" and "no-such-program" in score.detail, score.detail
    missing_script = _task([{"command": ["./build.sh"]}])
    assert _score(missing_script, FINISHED).reward == 0.0  # a path is the workspace's to provide


@pytest.mark.parametrize(
    ("checks", "message"),
    [
        ([], "at least one check"),
        ([{"path": "../x", "exists": True}], "relative path"),
        ([{"path": "/etc/passwd", "exists": True}], "relative path"),
        ([{"path": "a", "exists": True, "contains": "x"}], "exactly one of"),
        ([{"path": "a"}], "exactly one of"),
        ([{"contains": "x"}], "needs the 'path'"),
        ([{"path": "a", "matches": "("}], "not a valid regular expression"),
        ([{"command": ["true"], "path": "a"}], "no path or file test"),
        ([{"command": []}], "non-empty list"),
        ([{"path": "a", "exists": True, "timeout_s": 5}], "belong to a command check"),
        ([{"path": "a", "exits": True}], "exits"),
    ],
)
def test_bad_checks_are_task_errors(checks, message):
    from veriloop.tasks import check_task

    task = Task(id="x", domain="t", prompt="p", verifier={"kind": "workspace_checks", "checks": checks})
    problem = check_task(task)
    assert problem and message in problem, problem


def test_tasks_validate_runs_a_workspace_gold(env_with_pytest, tmp_path):
    from veriloop.tasks import check_task_file

    kept = [check for check in CHECKS if "exists" not in check]  # a gold is written over the initial files
    base = {"domain": "t", "prompt": "p", "verifier": {"kind": "workspace_checks", "checks": kept}}
    base |= {"environment": "pytest", "workspace": INITIAL}
    rows = [
        {**base, "id": "good", "gold": {"workspace": FINISHED}},
        {**base, "id": "bad", "gold": {"workspace": INITIAL}},
    ]
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    errors = check_task_file(tmp_path / "t.jsonl", gold=True).errors
    assert len(errors) == 1 and "line 2" in errors[0] and "gold answer fails" in errors[0], errors
