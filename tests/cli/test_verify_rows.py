"""``veriloop verify`` scores row by row: a final workspace over bounds scores that row 0, as in an episode."""

from __future__ import annotations

import json

from veriloop.core import Response, Score, Task, judgeable_response, write_jsonl
from veriloop.core._workspace import MAX_FILES

TASK = Task(id="capital", domain="facts", prompt="Capital of France?", verifier={"kind": "exact"}, gold="Paris")
TOO_MANY_FILES = {f"f{number}.txt": "" for number in range(MAX_FILES + 1)}


def test_an_unjudgeable_workspace_scores_its_row_zero_and_the_others_normally(tmp_path, run_cli):
    write_jsonl(tmp_path / "tasks.jsonl", [TASK])
    responses = [
        {"id": "plain", "task_id": "capital", "response": "Paris"},
        {"id": "escape", "task_id": "capital", "response": "Paris", "workspace": {"../outside.txt": "x"}},
        {"id": "many", "task_id": "capital", "response": "Paris", "workspace": TOO_MANY_FILES},
        {"id": "fine", "task_id": "capital", "response": "Paris", "workspace": {"notes.txt": "x"}},
        {"id": "wrong", "task_id": "capital", "response": "Lyon"},
    ]
    write_jsonl(tmp_path / "r.jsonl", responses)
    out = tmp_path / "scores.jsonl"
    args = ["--tasks", str(tmp_path / "tasks.jsonl"), "--responses", str(tmp_path / "r.jsonl"), "--out", str(out)]
    done = run_cli("verify", *args)
    assert done.returncode == 0, done.stderr
    scores = [json.loads(line) for line in out.read_text().splitlines()]
    assert [s["id"] for s in scores] == [r["id"] for r in responses]
    assert [(s["status"], s["reward"], s["passed"]) for s in scores] == [
        ("scored", 1.0, True),
        ("scored", 0.0, False),
        ("scored", 0.0, False),
        ("scored", 1.0, True),
        ("scored", 0.0, False),
    ]
    assert "cannot be judged" in scores[1]["detail"] and "'..'" in scores[1]["detail"]
    assert f"more than {MAX_FILES} files" in scores[2]["detail"] and scores[2]["feedback"]
    assert "verified 5 responses" in done.stderr and "0 infra errors" in done.stderr


def test_other_bad_fields_still_refuse_the_file(tmp_path, run_cli):
    write_jsonl(tmp_path / "tasks.jsonl", [TASK])
    responses = tmp_path / "r.jsonl"
    responses.write_text('{"id": "1", "task_id": "capital", "response": "Paris", "workspace": ["a list"]}\n')
    out = tmp_path / "o.jsonl"
    done = run_cli("verify", "--tasks", str(tmp_path / "tasks.jsonl"), "--responses", str(responses), "--out", str(out))
    assert done.returncode == 2 and f"{responses}: line 1:" in done.stderr and not out.exists()


def test_episodes_and_verify_read_a_response_the_same_way():
    row = {"id": "r", "task_id": "capital", "response": "Paris", "workspace": TOO_MANY_FILES}
    judged = judgeable_response(row)
    assert isinstance(judged, Score) and judged.status == "scored" and judged.reward == 0.0
    assert judged.id == "r" and judged.task_id == "capital" and "cannot be judged" in judged.detail
    fine = judgeable_response({**row, "workspace": {"a.txt": "x"}})
    assert isinstance(fine, Response) and fine.workspace == {"a.txt": "x"}
