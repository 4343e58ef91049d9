"""Importers: GSM8K-style JSONL, verl Parquet, reasoning-gym; bad rows reported by line."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from veriloop.core import Response, RowErrors, UserError
from veriloop.tasks import IMPORTERS, import_tasks
from veriloop.verifiers import verify

GSM8K_ROWS = [
    {
        "question": "Natalia sold clips to 48 of her friends in April, and then she sold half as many in May. "
        "How many clips did she sell altogether?",
        "answer": "In May she sold 48/2 = 24.\n#### 72",
    },
    {"question": "Weng earns $12 an hour. How much did she earn for 50 minutes?", "answer": "#### 10"},
    {"question": "What is 1,000 + 1?", "answer": 1001},
]


def write_lines(path, rows):
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows))
    return path


def test_jsonl_gsm8k_style(tmp_path):
    path = write_lines(tmp_path / "gsm8k.jsonl", GSM8K_ROWS)
    tasks = import_tasks("jsonl", file=path, instruction="Put the final answer after ####.")
    assert [t.id for t in tasks] == ["gsm8k/1", "gsm8k/2", "gsm8k/3"]
    assert [t.gold for t in tasks] == ["72", "10", "1001"]
    assert tasks[0].prompt.endswith("Put the final answer after ####.")
    assert tasks[0].verifier == {"kind": "math"} and tasks[0].domain == "math"
    for task in tasks:
        assert verify(task, Response(id="r", task_id=task.id, response=f"... #### {task.gold}")).passed


def test_jsonl_custom_fields_and_verifier(tmp_path):
    rows = [{"uid": "a", "q": "Capital of France?", "a": "Paris"}, {"uid": "b", "q": "Capital of Japan?", "a": "Tokyo"}]
    path = write_lines(tmp_path / "facts.jsonl", rows)
    tasks = import_tasks(
        "jsonl",
        file=path,
        question_field="q",
        answer_field="a",
        id_field="uid",
        domain="facts",
        verifier='{"kind": "exact", "case_sensitive": false}',
        name="capitals",
    )
    assert [t.id for t in tasks] == ["capitals/a", "capitals/b"]
    assert verify(tasks[0], Response(id="r", task_id="capitals/a", response="paris")).passed


def test_jsonl_reports_every_bad_row_by_line(tmp_path):
    path = write_lines(
        tmp_path / "bad.jsonl",
        [
            GSM8K_ROWS[0],
            '{"question": "truncated',
            {"question": "", "answer": "1"},
            {"question": "q", "answer": {"x": 1}},
            GSM8K_ROWS[1],
        ],
    )
    with pytest.raises(RowErrors) as caught:
        import_tasks("jsonl", file=path)
    errors = caught.value.errors
    assert errors[0].startswith(f"{path}: line 2: malformed JSON")
    assert errors[1] == f"{path}: line 3: field 'question' must be a non-empty string"
    assert errors[2] == f"{path}: line 4: field 'answer' must be a string or number"
    assert len(errors) == 3


def test_jsonl_bad_verifier_and_duplicate_ids(tmp_path):
    path = write_lines(tmp_path / "d.jsonl", [{"id": "x", **GSM8K_ROWS[1]}, {"id": "x", **GSM8K_ROWS[1]}])
    with pytest.raises(RowErrors, match=r"line 2: duplicate id 'd/x' \(first on line 1\)"):
        import_tasks("jsonl", file=path, id_field="id")
    with pytest.raises(RowErrors, match="unknown verifier kind 'telepathy'"):
        import_tasks("jsonl", file=path, verifier="telepathy")


def verl_table(rows):
    return pa.Table.from_pylist(rows)


VERL_ROWS = [
    {
        "data_source": "openai/gsm8k",
        "prompt": [{"role": "user", "content": "What is 6 * 7?"}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": "42"},
        "extra_info": {"split": "train", "index": 0},
    },
    {
        "data_source": "openai/gsm8k",
        "prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2 + 2?"}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": "4"},
        "extra_info": {"split": "train", "index": 1},
    },
]


def test_verl_parquet_native_schema(tmp_path):
    path = tmp_path / "train.parquet"
    pq.write_table(verl_table(VERL_ROWS), path)
    tasks = import_tasks("verl-parquet", file=path)
    assert [t.id for t in tasks] == ["openai/gsm8k/train/0", "openai/gsm8k/train/1"]
    assert tasks[1].messages()[0] == {"role": "system", "content": "Be brief."}
    assert tasks[0].domain == "math" and tasks[0].gold == "42"
    assert tasks[0].metadata["data_source"] == "openai/gsm8k"
    assert verify(tasks[0], Response(id="r", task_id=tasks[0].id, response="\\boxed{42}")).passed


def test_verl_parquet_verifier_by_data_source(tmp_path):
    path = tmp_path / "train.parquet"
    pq.write_table(verl_table(VERL_ROWS), path)
    tasks = import_tasks("verl-parquet", file=path, verifiers='{"openai/gsm8k": "exact"}')
    assert all(t.verifier == {"kind": "exact"} for t in tasks)


def test_verl_parquet_bad_rows(tmp_path):
    rows = [
        VERL_ROWS[0],
        {**VERL_ROWS[1], "reward_model": {"style": "rule"}},
        {**VERL_ROWS[1], "prompt": [{"role": "narrator", "content": "x"}]},
    ]
    path = tmp_path / "bad.jsonl"
    write_lines(path, rows)
    with pytest.raises(RowErrors) as caught:
        import_tasks("verl-parquet", file=path)
    assert caught.value.errors[0] == f"{path}: line 2: missing field 'reward_model.ground_truth'"
    assert caught.value.errors[1].startswith(f"{path}: line 3: field 'prompt.0.role'")


def test_reasoning_gym_import_is_seeded():
    first = import_tasks("reasoning-gym", dataset="chain_sum", size=5, seed=1)
    assert first == import_tasks("reasoning-gym", dataset="chain_sum", size=5, seed=1)
    assert [t.prompt for t in first] != [
        t.prompt for t in import_tasks("reasoning-gym", dataset="chain_sum", size=5, seed=2)
    ]
    assert first[0].verifier["kind"] == "reasoning_gym" and first[0].domain == "chain_sum"
    assert "<answer>" in first[0].prompt


def test_reasoning_gym_config_and_errors():
    tasks = import_tasks(
        "reasoning-gym", dataset="basic_arithmetic", size=3, seed=1, config='{"min_terms": 2, "max_terms": 2}'
    )
    assert tasks[0].verifier["config"] == {"min_terms": 2, "max_terms": 2}
    assert all(verify(t, Response(id="r", task_id=t.id, response=t.gold)).passed for t in tasks)
    with pytest.raises(UserError, match="unknown reasoning-gym dataset 'nope'; known: ab, acre"):
        import_tasks("reasoning-gym", dataset="nope")
    with pytest.raises(UserError, match="bad config"):
        import_tasks("reasoning-gym", dataset="basic_arithmetic", config={"colour": 1})


def test_importers_are_registered():
    assert {"jsonl", "reasoning-gym", "verl-parquet"} <= set(IMPORTERS.names())
