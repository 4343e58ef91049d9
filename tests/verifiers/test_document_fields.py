"""The ``document_fields`` kind: per-field credit against the source, hedges refused, fabricated
fields and inconsistent totals costing credit, diagnoses in the feedback; and its audit."""

from __future__ import annotations

import json

import pytest

from veriloop.core import Response, Task
from veriloop.tasks import check_task, generate_tasks
from veriloop.verifiers import audit_tasks, verify

DOCUMENT = (
    "| EUR thousands | FY2024 | FY2023 |\n|---|---:|---:|\n"
    "| Revenue | 120,000 | 100,000 |\n| Cost of sales | -70,000 | -61,000 |\n| Gross profit | 50,000 | 39,000 |"
)
GOLD = {"revenue": 120000, "cost_of_sales": 70000, "gross_profit": 50000, "gross_margin_pct": 41.67}


def _task(**verifier) -> Task:
    return Task(
        id="doc/1",
        domain="financial_docs",
        prompt=DOCUMENT,
        verifier={
            "kind": "document_fields",
            "units": {"revenue": "thousands", "cost_of_sales": "thousands", "gross_profit": "thousands"},
            "tolerances": {"gross_margin_pct": {"abs_tol": 0.011}},
            "identities": [{"total": "gross_profit", "parts": ["revenue", "-cost_of_sales"]}],
            **verifier,
        },
        gold=GOLD,
    )


def _score(answer: dict | str, task: Task | None = None):
    text = answer if isinstance(answer, str) else "```json\n" + json.dumps(answer) + "\n```"
    task = task or _task()
    return verify(task, Response(id="r", task_id=task.id, response=text))


def test_the_gold_answer_passes_in_every_accepted_form():
    assert _score(GOLD).passed and _score(GOLD).reward == 1.0
    bare = "Here are the figures:\n" + json.dumps(GOLD, indent=2)
    assert _score(bare).passed
    as_strings = {
        "revenue": "120,000",
        "cost_of_sales": "70,000",
        "gross_profit": "50,000",
        "gross_margin_pct": "41.67%",
    }
    assert _score(as_strings).passed
    with_units = {**GOLD, "revenue": {"value": 120000, "unit": "EUR thousands"}}
    assert _score(with_units).passed
    assert _score(f"<answer>{json.dumps(GOLD)}</answer>").passed


def test_partial_credit_per_field_and_the_diagnosis_of_each_wrong_one():
    score = _score({**GOLD, "gross_margin_pct": 40.0})
    assert not score.passed and score.reward == pytest.approx(3 / 4)
    assert "gross_margin_pct: 40 is too low" in score.feedback
    prior_year = _score({**GOLD, "revenue": 100000, "gross_profit": 30000})
    assert prior_year.reward == pytest.approx(2 / 4)
    assert "revenue: 100000 is in the document but is another figure" in prior_year.feedback
    assert "gross_profit: 30000 appears nowhere in the document" in prior_year.feedback
    signs = _score({**GOLD, "cost_of_sales": -70000, "gross_profit": 190000})
    assert "cost_of_sales: -70000 has the wrong sign" in signs.feedback
    millions = _score({**GOLD, "revenue": 120.0, "gross_profit": 50.0, "cost_of_sales": 70.0})
    assert (
        millions.reward == pytest.approx(1 / 4) and "off by a factor of 1,000 (asked in thousands)" in millions.feedback
    )


def test_a_unit_other_than_the_asked_one_is_wrong_whatever_the_number():
    score = _score({**GOLD, "revenue": {"value": 120000, "unit": "EUR millions"}})
    assert not score.passed and "given in 'EUR millions', asked in thousands" in score.feedback


def test_a_total_whose_parts_do_not_add_up_loses_its_credit():
    # cost_of_sales is wrong, and gross_profit, right on its own, no longer equals its parts
    score = _score({**GOLD, "cost_of_sales": 71000})
    assert score.reward == pytest.approx(2 / 4)
    assert "gross_profit: revenue - cost_of_sales = 49000, not 50000" in score.feedback


def test_fabricated_fields_count_as_wrong_fields():
    score = _score({**GOLD, "net_income": 12000, "ebitda": 9000})
    assert not score.passed and score.reward == pytest.approx(4 / 6)
    assert "net_income: not asked for (a fabricated field)" in score.feedback
    ignored = _score({**GOLD, "net_income": 12000}, _task(fabricated="ignore"))
    assert ignored.passed


@pytest.mark.parametrize(
    "answer",
    [
        '```json\n{"revenue": 100000, "revenue": 120000, "cost_of_sales": 70000, "gross_profit": 50000, '
        '"gross_margin_pct": 41.67}\n```',
        {**GOLD, "revenue": [100000, 120000]},
        {**GOLD, "revenue": "100,000 or 120,000"},
        {**GOLD, "revenue": True},
        {**GOLD, "Revenue": 120000},
    ],
    ids=["key twice", "a list", "two numbers", "a boolean", "same name twice once normalised"],
)
def test_hedges_earn_nothing_for_the_field(answer):
    score = _score(answer)
    assert not score.passed and score.reward <= 3 / 4


def test_answers_without_a_json_object_score_zero_and_say_what_to_do():
    for text in ["revenue: 120000", "", "{not json", "[1, 2, 3]"]:
        score = _score(text)
        assert score.status == "scored" and score.reward == 0.0
        assert "JSON object" in score.feedback


def test_hostile_answers_are_scored_not_crashing_the_grader():
    deep = "```json\n" + '{"a": ' * 50_000 + "1" + "}" * 50_000 + "\n```"
    many = {f"k{i}": i for i in range(100_000)}
    for text in [deep, "```json\n" + json.dumps(many) + "\n```", "{" * 200_000, '{"revenue": 1e999}']:
        score = _score(text)
        assert score.status == "scored" and not score.passed


def test_the_task_check_rejects_identities_that_do_not_hold_and_unknown_names():
    assert check_task(_task()) is None
    broken = _task(identities=[{"total": "gross_profit", "parts": ["revenue", "cost_of_sales"]}])
    assert "identities.0 does not hold on the gold values" in check_task(broken)
    unknown = _task(identities=[{"total": "net_income", "parts": ["revenue"]}])
    assert "identities.0 names fields that have no gold value: net_income" in check_task(unknown)
    assert "units name fields that have no gold value: ebit" in check_task(_task(units={"ebit": "thousands"}))
    no_gold = Task(id="d", domain="d", prompt="p", verifier={"kind": "document_fields"}, gold="x")
    assert "gold mapping" in check_task(no_gold)


def test_a_task_without_gold_is_an_infra_error_not_a_zero():
    task = Task(id="d", domain="d", prompt="p", verifier={"kind": "document_fields"})
    score = verify(task, Response(id="r", task_id="d", response="{}"))
    assert score.status == "infra_error" and score.reward is None


@pytest.mark.e2e
def test_the_audit_finds_no_exploit_that_fools_generated_tasks():
    tasks = generate_tasks("financial-docs", seed=4, size=9, groups=3)
    report = audit_tasks(tasks, per_kind=9, repeats=1, threads=2)
    assert not report.gold_failures and not report.weak
    rows = {row.category: row for row in report.rows}
    assert {"hedging", "mutated_gold", "channel_forgery", "resource_abuse", "early_exit"} <= set(rows)
    assert all(row.ok for row in report.rows), [row for row in report.rows if not row.ok]
    assert rows["hedging"].max_reward < 1.0


def test_two_different_answer_objects_are_a_hedge():
    draft = {**GOLD, "revenue": 100000}
    two_blocks = f"```json\n{json.dumps(draft)}\n```\nOr rather:\n```json\n{json.dumps(GOLD)}\n```"
    two_lines = json.dumps(draft) + "\n" + json.dumps(GOLD)
    for text in (two_blocks, two_lines):
        score = _score(text)
        assert score.reward == 0.0 and "not several" in score.feedback
    assert _score(f"Draft:\n{json.dumps(draft)}\n<answer>{json.dumps(GOLD)}</answer>").passed
