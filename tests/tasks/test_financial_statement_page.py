"""``financial-docs --document statement``: one page (the income statement alone) that, asked one
question group, fits the tiny model's 1,024-token context with room for the answer, gold that passes its verifier at every
level, and the option through the command."""

from __future__ import annotations

import json

import pytest

from veriloop.core import Response, UserError
from veriloop.tasks import generate_tasks, load_tasks
from veriloop.training._tiny_model import TinyModelSpec, build_tokenizer
from veriloop.verifiers import verify

ANSWER_ROOM = 100  # tokens; the longest one-group answer (three fields) takes under 100


def _answer(values: dict) -> str:
    return "```json\n" + json.dumps(values) + "\n```"


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer(TinyModelSpec())


@pytest.mark.parametrize("level", [1, 2, 3])
def test_a_statement_is_one_page_that_fits_the_tiny_context_and_its_gold_passes(level, tokenizer):
    tasks = generate_tasks("financial-docs", seed=7, size=20, difficulty=level, document="statement", groups=1)
    for task in tasks:
        assert task.metadata["document"] == "statement" and task.domain == "financial_docs"
        assert "income statement" in task.prompt and "balance sheet" not in task.prompt
        assert "--- Page" not in task.prompt and "Notes to the financial statements" not in task.prompt
        chat = tokenizer.apply_chat_template(
            [{"role": "user", "content": task.prompt}], add_generation_prompt=True, tokenize=False
        )
        assert len(tokenizer(chat)["input_ids"]) + ANSWER_ROOM <= TinyModelSpec().max_positions, task.id
        assert verify(task, Response(id="g", task_id=task.id, response=_answer(task.gold))).reward == 1.0
        name = next(iter(task.gold))
        off = verify(
            task, Response(id="m", task_id=task.id, response=_answer({**task.gold, name: task.gold[name] + 5}))
        )
        assert not off.passed and name in off.feedback


def test_statement_questions_are_answered_by_the_page_shown():
    for task in generate_tasks("financial-docs", seed=3, size=30, difficulty=1, document="statement"):
        revenue_row = next(line for line in task.prompt.splitlines() if line.startswith("| Revenue |"))
        for name, value in task.gold.items():
            row = revenue_row if name.startswith("revenue_") else task.prompt
            assert f"{int(value):,} |" in row, (name, value)
    names = {
        n.rsplit("_", 1)[0]
        for t in generate_tasks("financial-docs", seed=3, size=30, document="statement")
        for n in t.gold
    }
    assert {"gross_margin_pct", "revenue_growth_pct", "gross_profit"} <= names
    assert not names & {"total_assets", "net_debt", "q4_revenue"}  # nothing the page does not show


def test_the_report_stays_the_default_and_a_bad_document_is_a_user_error():
    assert all(t.metadata["document"] == "report" for t in generate_tasks("financial-docs", seed=1, size=3))
    with pytest.raises(UserError, match="--document"):
        generate_tasks("financial-docs", seed=1, size=2, document="memo")


@pytest.mark.e2e
def test_the_command_takes_the_document_option(tmp_path, run_cli):
    out = tmp_path / "statements.jsonl"
    args = ("tasks", "generate", "financial-docs", "--seed", "2", "--size", "4", "--document", "statement")
    result = run_cli(*args, "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert all(t.metadata["document"] == "statement" for t in load_tasks(out))
    assert run_cli("tasks", "validate", str(out)).returncode == 0
    bad = run_cli(
        "tasks",
        "generate",
        "financial-docs",
        "--seed",
        "2",
        "--size",
        "4",
        "--document",
        "memo",
        "--out",
        str(tmp_path / "x.jsonl"),
    )
    assert bad.returncode == 2 and "--document" in bad.stderr and not (tmp_path / "x.jsonl").exists()
