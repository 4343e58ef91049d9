"""``veriloop verify``, ``veriloop audit`` and ``veriloop tasks validate`` on code tasks."""

import json

import pytest

from veriloop.core import Task, write_jsonl


def _write(path, rows):
    write_jsonl(path, rows)
    return str(path)


def _tasks(code):
    exact = Task(id="capital", domain="facts", prompt="Capital of France?", verifier={"kind": "exact"}, gold="Paris")
    return [code.add_task(task_id="add"), code.add_task(code.CODED_TESTS, task_id="add-coded"), exact]


@pytest.mark.e2e
def test_verify_writes_one_score_per_response_in_order_with_ids(tmp_path, run_cli, code):
    tasks = _write(tmp_path / "tasks.jsonl", _tasks(code))
    responses = [
        {"id": "z-last", "task_id": "capital", "response": "Paris"},
        {"id": "a", "task_id": "add-coded", "response": code.GOLD_ADD},
        {"id": "loop", "task_id": "add", "response": code.fenced("def add(a, b):\n    while True:\n        pass")},
        {"id": "a", "task_id": "add", "response": code.fenced("def add(a, b):\n    return a - b")},
        {"id": "m", "task_id": "capital", "response": "Lyon"},
        {"id": "exit", "task_id": "add-coded", "response": "import os\nos._exit(0)"},
    ]
    out = tmp_path / "scores.jsonl"
    result = run_cli(
        "verify",
        "--tasks",
        tasks,
        "--responses",
        _write(tmp_path / "r.jsonl", responses),
        "--out",
        str(out),
        "--workers",
        "2",
    )
    assert result.returncode == 0, result.stderr
    scores = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(s["id"], s["task_id"]) for s in scores] == [(r["id"], r["task_id"]) for r in responses]
    assert [s["passed"] for s in scores] == [True, True, False, False, False, False], scores
    assert all(s["status"] == "scored" for s in scores)
    assert "timed out" in scores[2]["feedback"] and scores[3]["feedback"]
    assert "verified 6 responses" in result.stderr and "2 passed" in result.stderr and "0 infra errors" in result.stderr


def test_verify_reports_every_bad_response_row_with_its_line_and_exits_2(tmp_path, run_cli, code):
    tasks = _write(tmp_path / "tasks.jsonl", _tasks(code))
    responses = tmp_path / "r.jsonl"
    responses.write_text('{"id": "1", "task_id": "add", "response": "x"}\n{not json\n{"id": "3", "task_id": "add"}\n')
    result = run_cli("verify", "--tasks", tasks, "--responses", str(responses), "--out", str(tmp_path / "o.jsonl"))
    assert result.returncode == 2
    assert f"{responses}: line 2: malformed JSON" in result.stderr
    assert f"{responses}: line 3: missing field 'response'" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "o.jsonl").exists()

    responses.write_text(
        '{"id": "1", "task_id": "add", "response": "x"}\n{"id": "2", "task_id": "nope", "response": "x"}\n'
    )
    result = run_cli("verify", "--tasks", tasks, "--responses", str(responses), "--out", str(tmp_path / "o.jsonl"))
    assert result.returncode == 2 and f"{responses}: line 2: task_id 'nope' is not in" in result.stderr


def test_validate_runs_every_gold_answer_through_its_verifier(tmp_path, run_cli, code):
    broken = code.add_task(task_id="wrong-gold")
    broken = Task(**{**broken.model_dump(), "gold": "    return a * b\n"})
    path = _write(tmp_path / "tasks.jsonl", [*_tasks(code), broken])
    result = run_cli("tasks", "validate", path)
    assert result.returncode == 2
    assert f"{path}: line 4: gold answer fails its verifier: " in result.stderr
    assert "add(2, 3) returned 6, expected 5" in result.stderr
    assert run_cli("tasks", "validate", _write(tmp_path / "ok.jsonl", _tasks(code))).returncode == 0


def test_audit_flags_a_deliberately_weak_verifier(tmp_path, run_cli):
    weak = [
        Task(
            id=f"greet/{i}",
            domain="format",
            prompt="Say the date",
            verifier={"kind": "regex", "pattern": ".*"},
            gold=gold,
        )
        for i, gold in enumerate(["2026-01-31", "1999-12-31"])
    ]
    out = tmp_path / "audit.json"
    result = run_cli("audit", "--tasks", _write(tmp_path / "weak.jsonl", weak), "--out", str(out))
    assert result.returncode == 1, result.stdout + result.stderr
    report = json.loads(out.read_text())
    fooled = {row["category"] for row in report["rows"] if row["fooled"]}
    assert {"early_exit", "hedging", "mutated_gold"} <= fooled
    assert not report["ok"] and "fooled" in result.stderr


@pytest.mark.e2e
def test_audit_passes_robust_verifiers(tmp_path, run_cli, code):
    robust = [
        code.add_task(task_id="add", timeout_s=1),
        code.add_task(code.CODED_TESTS, task_id="add-coded", timeout_s=1),
        Task(
            id="date",
            domain="format",
            prompt="Say the date",
            gold="2026-01-31",
            verifier={"kind": "regex", "pattern": r"\d{4}-\d{2}-\d{2}"},
        ),
        Task(id="capital", domain="facts", prompt="Capital of France?", verifier={"kind": "exact"}, gold="Paris"),
    ]
    out = tmp_path / "audit.json"
    result = run_cli("audit", "--tasks", _write(tmp_path / "robust.jsonl", robust), "--out", str(out), "--repeats", "2")
    report = json.loads(out.read_text())
    assert result.returncode == 0, json.dumps([r for r in report["rows"] if r["fooled"] or r["broke"]])
    assert report["ok"] and not report["gold_failures"] and not report["flaky"]
    python_rows = {row["category"] for row in report["rows"] if row["kind"] == "python_tests"}
    assert python_rows == {
        "early_exit",
        "always_equal",
        "grader_tampering",
        "stack_inspection",
        "channel_forgery",
        "read_tests",
        "special_casing",
        "hedging",
        "resource_abuse",
        "mutated_gold",
    }
    assert "verifier audit" in result.stdout


def test_audit_of_a_bad_task_file_exits_2_with_line_numbers(tmp_path, run_cli):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "a", "domain": "d", "prompt": "p", "verifier": {"kind": "python_tests"}}\n')
    result = run_cli("audit", "--tasks", str(path))
    assert (
        result.returncode == 2
        and f"{path}: line 1: python_tests verifier: missing field 'verifier.entry_point'" in result.stderr
    )
