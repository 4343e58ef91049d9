"""The ``financial-docs`` generator and importer: consistent reports, figures that agree with the
pages they are read from, gold that passes its verifier, and the commands around them."""

from __future__ import annotations

import json
import random
import re

import pytest

from veriloop.core import Response, RowErrors, UserError
from veriloop.tasks import generate_tasks, import_tasks, load_tasks
from veriloop.tasks.generators._financial_statements import draw_report, pages
from veriloop.verifiers import verify


def _answer(values: dict) -> str:
    return "```json\n" + json.dumps(values) + "\n```"


@pytest.mark.parametrize("seed", range(40))
def test_every_report_is_consistent(seed):
    report = draw_report(random.Random(seed), segments=3)
    for year in (report.current, report.prior):
        assert year.total_assets == year.total_liabilities + year.total_equity
        assert min(year.cash, year.receivables, year.inventories, year.payables, year.retained_earnings) > 0
        assert year.net_income > 0 and year.income_tax >= 0
    assert (
        report.current.retained_earnings
        == report.prior.retained_earnings + report.current.net_income - report.dividends
    )
    assert report.dividends > 0
    assert sum(now for _, now, _ in report.segments) == report.current.revenue
    assert sum(before for _, _, before in report.segments) == report.prior.revenue
    assert sum(report.quarters) == report.current.revenue and min(report.quarters) > 0
    assert report.prior_cost_as_reported != report.prior.cost_of_sales


def _table_value(text: str, label: str, column: int) -> int:
    row = next(
        line for line in text.splitlines() if line.startswith(f"| {label} |") or line.startswith(f"| **{label}** |")
    )
    return int(row.split("|")[column + 2].strip().replace(",", ""))


def test_the_pages_show_the_figures_of_the_report():
    report = draw_report(random.Random(7), segments=4)
    text = "\n".join(pages(report, quarterly=True, notes_per_page=1))
    assert len(re.findall(r"^--- Page \d+ ---$", text, re.MULTILINE)) == 9
    assert _table_value(text, "Revenue", 0) == report.current.revenue
    assert _table_value(text, "Revenue", 1) == report.prior.revenue
    assert _table_value(text, "Cost of sales", 1) == -report.prior.cost_of_sales
    assert _table_value(text, "Total assets", 0) == _table_value(text, "Total liabilities and equity", 0)
    assert f"{report.current.borrowings / 1000:,.3f} million" in text
    assert f"originally reported as {report.prior_cost_as_reported:,} thousand" in text
    assert f"{report.quarters[3]:,}" not in text.split("Note 6")[1]  # Q4 must be derived


@pytest.mark.parametrize("level", [1, 2, 3])
def test_every_gold_answer_passes_and_near_misses_do_not(level):
    tasks = generate_tasks("financial-docs", seed=11, size=25, difficulty=level, groups=3)
    for task in tasks:
        assert task.metadata["level"] == level and task.domain == "financial_docs"
        gold = verify(task, Response(id="g", task_id=task.id, response=_answer(task.gold)))
        assert gold.passed and gold.reward == 1.0, (task.id, gold.detail)
        name = next(iter(task.gold))
        off = verify(
            task, Response(id="m", task_id=task.id, response=_answer({**task.gold, name: task.gold[name] + 5}))
        )
        assert not off.passed and off.reward < 1.0 and name in off.feedback


def test_difficulty_grows_with_length_and_derived_steps():
    by_level = {level: generate_tasks("financial-docs", seed=2, size=20, difficulty=level) for level in (1, 2, 3)}
    lengths = {level: sum(len(t.prompt) for t in tasks) / len(tasks) for level, tasks in by_level.items()}
    assert lengths[1] < lengths[2] < lengths[3]
    pages_of = {level: max(t.prompt.count("--- Page") for t in tasks) for level, tasks in by_level.items()}
    assert pages_of[1] < pages_of[3]
    level3_names = {name for t in by_level[3] for name in t.gold}
    assert any(n.startswith("q4_revenue") for n in level3_names)
    assert any(n.startswith("gross_profit_as_reported") for n in level3_names)
    assert any(t.verifier["identities"] for t in by_level[1])


def test_lookups_read_the_figure_of_the_asked_year_not_the_prior_one():
    for task in generate_tasks("financial-docs", seed=5, size=40, difficulty=1):
        for name, value in task.gold.items():
            if name.startswith("revenue_fy"):
                assert f"| Revenue | {int(value):,} |" in task.prompt


def test_the_same_seed_gives_the_same_tasks():
    first = generate_tasks("financial-docs", seed=3, size=6)
    assert first == generate_tasks("financial-docs", seed=3, size=6)
    assert first != generate_tasks("financial-docs", seed=4, size=6)
    assert generate_tasks("financial-docs", seed=3, size=3) == first[:3]


def test_bad_options_are_user_errors():
    with pytest.raises(UserError, match="--difficulty"):
        generate_tasks("financial-docs", seed=1, size=2, difficulty=4)
    with pytest.raises(UserError, match="unknown option --questions"):
        generate_tasks("financial-docs", seed=1, size=2, questions=3)


def _rows(tmp_path, rows: list) -> str:
    path = tmp_path / "docs.jsonl"
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return str(path)


GOOD = {
    "id": "acme-2024",
    "document": "Acme plc. Revenue was EUR 182,340 thousand; cost of sales 100,000; gross profit 82,340.",
    "questions": {"revenue": "Revenue in EUR thousands.", "cost": "Cost of sales.", "gross": "Gross profit."},
    "gold": {"revenue": 182340, "cost": 100000, "gross": 82340},
    "units": {"revenue": "thousands"},
    "identities": [{"total": "gross", "parts": ["revenue", "-cost"]}],
}


def test_the_importer_turns_documents_and_gold_into_tasks(tmp_path):
    (tmp_path / "report.md").write_text("# Beta AG\n\nNet income: 4,500 (FY2023: 3,900).")
    second = {
        "document_file": "report.md",
        "questions": {"net_income": "Net income FY2024."},
        "gold": {"net_income": 4500},
    }
    tasks = import_tasks("financial-docs", file=_rows(tmp_path, [GOOD, second]))
    assert [t.id for t in tasks] == ["docs/acme-2024", "docs/2"]
    assert tasks[1].prompt.startswith("# Beta AG") and "- net_income: Net income FY2024." in tasks[1].prompt
    for task in tasks:
        assert task.verifier["kind"] == "document_fields"
        assert verify(task, Response(id="g", task_id=task.id, response=_answer(task.gold))).passed
    prior = verify(tasks[1], Response(id="p", task_id=tasks[1].id, response=_answer({"net_income": 3900})))
    assert not prior.passed and "in the document but is another figure" in prior.feedback


def test_the_importer_reports_every_bad_row_with_its_line(tmp_path):
    rows = [
        GOOD,
        {**GOOD, "id": "b", "gold": {"revenue": 1, "cost": 2}},
        {**GOOD, "id": "c", "identities": [{"total": "gross", "parts": ["revenue", "cost"]}]},
        {**GOOD, "id": "d", "document": None, "document_file": "../../etc/passwd"},
        "{not json",
        {**GOOD, "id": "f", "document": None, "document_file": "missing.md"},
        {**GOOD, "id": "g", "gold": {"revenue": "lots", "cost": 1, "gross": 2}},
    ]
    with pytest.raises(RowErrors) as caught:
        import_tasks("financial-docs", file=_rows(tmp_path, rows))
    text = str(caught.value)
    assert "line 2: no gold for gross" in text
    assert "line 3: document_fields verifier: identities.0 does not hold on the gold values" in text
    assert "line 4: document_file '../../etc/passwd' is outside the folder of the task file" in text
    assert "line 5:" in text and "line 6: document_file 'missing.md' not found" in text
    assert "line 7:" in text and "line 1:" not in text


@pytest.mark.e2e
def test_generate_validate_and_verify_through_the_command(tmp_path, run_cli):
    out = tmp_path / "fin.jsonl"
    result = run_cli("tasks", "generate", "financial-docs", "--seed", "1", "--size", "6", "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert run_cli("tasks", "validate", str(out)).returncode == 0
    tasks = load_tasks(out)
    responses = tmp_path / "responses.jsonl"
    rows = [{"id": f"{t.id}#g", "task_id": t.id, "response": _answer(t.gold)} for t in tasks]
    rows += [{"id": f"{t.id}#e", "task_id": t.id, "response": _answer({**t.gold, "extra": 1})} for t in tasks]
    responses.write_text("".join(json.dumps(r) + "\n" for r in rows))
    scored = tmp_path / "scores.jsonl"
    result = run_cli("verify", "--tasks", str(out), "--responses", str(responses), "--out", str(scored))
    assert result.returncode == 0, result.stderr
    scores = [json.loads(line) for line in scored.read_text().splitlines()]
    assert [s["passed"] for s in scores] == [True] * 6 + [False] * 6
    audit = run_cli("audit", "--tasks", str(out), "--out", str(tmp_path / "audit.json"))
    assert audit.returncode == 0, audit.stdout + audit.stderr


def test_import_through_the_command_exits_2_on_bad_rows_and_writes_nothing(tmp_path, run_cli):
    out = tmp_path / "out.jsonl"
    bad = _rows(tmp_path, [GOOD, {**GOOD, "id": "x", "questions": {}}])
    result = run_cli("tasks", "import", "financial-docs", bad, "--out", str(out))
    assert result.returncode == 2 and "line 2: field 'questions' must map" in result.stderr
    assert "Traceback" not in result.stderr and not out.exists()
    good = _rows(tmp_path, [GOOD])
    assert run_cli("tasks", "import", "financial-docs", good, "--out", str(out), "--abs-tol", "0.5").returncode == 0
    assert load_tasks(out)[0].verifier["abs_tol"] == 0.5
