"""``veriloop tasks generate|import|sources|contamination`` through the installed command."""

from __future__ import annotations

import json

import pytest

from veriloop.core import Response
from veriloop.tasks import load_tasks
from veriloop.verifiers import verify


@pytest.mark.e2e
def test_generate_writes_a_valid_task_set(tmp_path, run_cli):
    out = tmp_path / "train.jsonl"
    result = run_cli(
        "tasks",
        "generate",
        "arithmetic",
        "--seed",
        "3",
        "--size",
        "20",
        "--out",
        str(out),
        "--difficulty",
        "2",
        "--instruction",
        "Answer with a number.",
    )
    assert result.returncode == 0, result.stderr
    assert "wrote 20 tasks (arithmetic)" in result.stderr
    tasks = load_tasks(out)
    assert len(tasks) == 20 and all(t.metadata["level"] == 2 for t in tasks)
    assert run_cli("tasks", "validate", str(out)).returncode == 0


def test_generate_numeric_tables_to_parquet(tmp_path, run_cli):
    out = tmp_path / "tables.parquet"
    result = run_cli(
        "tasks", "generate", "numeric-tables", "--seed", "1", "--size", "5", "--out", str(out), "--questions=2"
    )
    assert result.returncode == 0, result.stderr
    tasks = load_tasks(out)
    assert all(len(t.gold) == 2 for t in tasks)
    assert all(verify(t, Response(id="r", task_id=t.id, response=str(t.gold))).passed for t in tasks)


@pytest.mark.e2e
def test_bad_generator_option_is_one_line_and_exit_2(tmp_path, run_cli):
    out = tmp_path / "x.jsonl"
    result = run_cli(
        "tasks", "generate", "arithmetic", "--seed", "1", "--size", "5", "--out", str(out), "--colour", "red"
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: arithmetic: unknown option --colour; known: --seed, --size, --difficulty, --operands, "
        "--max-operands, --min-operand, --max-operand, --operators, --verifier, --instruction, --domain, --split, "
        "--heldout-share"
    ]
    assert not out.exists()
    unknown = run_cli("tasks", "generate", "poetry", "--seed", "1", "--size", "5", "--out", str(out))
    assert unknown.returncode == 2 and "unknown task generator 'poetry'" in unknown.stderr


def test_import_jsonl_bad_rows_are_line_numbered(tmp_path, run_cli):
    source = tmp_path / "gsm8k.jsonl"
    source.write_text(
        json.dumps({"question": "What is 2 + 2?", "answer": "#### 4"})
        + "\n"
        + '{"question": "broken\n'
        + json.dumps({"answer": "5"})
        + "\n"
    )
    out = tmp_path / "tasks.jsonl"
    result = run_cli("tasks", "import", "jsonl", str(source), "--out", str(out))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith(f"{source}: line 2: malformed JSON")
    assert lines[1] == f"{source}: line 3: field 'question' must be a non-empty string"
    assert "Traceback" not in result.stderr and not out.exists()


@pytest.mark.e2e
def test_import_jsonl_and_reasoning_gym(tmp_path, run_cli):
    source = tmp_path / "qa.jsonl"
    source.write_text(json.dumps({"q": "What is 2 + 2?", "a": "4"}) + "\n")
    out = tmp_path / "qa_tasks.jsonl"
    result = run_cli(
        "tasks", "import", "jsonl", str(source), "--question-field", "q", "--answer-field", "a", "--out", str(out)
    )
    assert result.returncode == 0, result.stderr
    assert load_tasks(out)[0].gold == "4"
    rg = tmp_path / "rg.jsonl"
    result = run_cli("tasks", "import", "reasoning-gym", "leg_counting", "--size", "4", "--seed", "2", "--out", str(rg))
    assert result.returncode == 0, result.stderr
    tasks = load_tasks(rg)
    assert len(tasks) == 4 and all(verify(t, Response(id="r", task_id=t.id, response=t.gold)).passed for t in tasks)


def test_import_missing_file_is_exit_2(tmp_path, run_cli):
    result = run_cli(
        "tasks", "import", "verl-parquet", str(tmp_path / "none.parquet"), "--out", str(tmp_path / "o.jsonl")
    )
    assert result.returncode == 2 and "no such file" in result.stderr


def test_sources_lists_generators_and_importers(run_cli):
    result = run_cli("tasks", "sources")
    assert result.returncode == 0
    for name in (
        "arithmetic",
        "numeric-tables",
        "jsonl",
        "reasoning-gym DATASET",
        "verl-parquet FILE",
        "--max-operand",
    ):
        assert name in result.stdout


@pytest.mark.e2e
def test_contamination_exit_codes(tmp_path, run_cli):
    paths = {}
    for name, seed in (("train", 1), ("same", 1), ("other", 2)):
        paths[name] = tmp_path / f"{name}.jsonl"
        run_cli(
            "tasks",
            "generate",
            "arithmetic",
            "--seed",
            str(seed),
            "--size",
            "30",
            "--difficulty",
            "5",
            "--out",
            str(paths[name]),
        )
    dirty = run_cli("tasks", "contamination", str(paths["train"]), str(paths["same"]), "--json")
    assert dirty.returncode == 1 and json.loads(dirty.stdout)["contaminated"] == 30
    clean = run_cli("tasks", "contamination", str(paths["train"]), str(paths["other"]))
    assert clean.returncode == 0 and "0 of 30 held-out tasks" in clean.stdout


@pytest.mark.e2e
def test_import_refuses_to_write_a_set_whose_gold_fails_its_verifier(tmp_path, run_cli):
    source = tmp_path / "qa.jsonl"
    rows = [{"q": "What is 2 + 2?", "a": "4"}, {"q": "Spell seven.", "a": "seven"}]
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = tmp_path / "qa_tasks.jsonl"
    digits = json.dumps({"kind": "regex", "pattern": r"\d+"})
    args = ["tasks", "import", "jsonl", str(source), "--question-field", "q", "--answer-field", "a", "--out", str(out)]
    result = run_cli(*args, "--verifier", digits)
    assert result.returncode == 2 and f"{out}: line 2: " in result.stderr and "gold" in result.stderr
    assert not out.exists() and not list(tmp_path.glob(".qa_tasks*"))  # nothing written, nothing left behind
    assert run_cli(*args, "--verifier", digits, "--skip-gold-check").returncode == 0 and out.exists()


def test_an_empty_task_file_is_an_error(tmp_path, run_cli):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    result = run_cli("tasks", "validate", str(empty))
    assert result.returncode == 2 and f"{empty}: holds no tasks" in result.stderr
