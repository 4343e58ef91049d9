"""Named figures stated more than once, as bounds, or with period labels: the numeric and
document_fields kinds credit one committed value only, and read a year label as a label."""

from __future__ import annotations

import json

import pytest

from veriloop.core import Response, Task
from veriloop.verifiers import extract_named_values, verify

GOLD = {"revenue": 12.0}


def score(response: str, gold=GOLD, kind: str = "numeric", **fields):
    task = Task(id="t", domain="tables", prompt="p", verifier={"kind": kind, **fields}, gold=gold)
    return verify(task, Response(id="r", task_id="t", response=response))


TWO_VALUES = {
    "key twice in a JSON object": '{"revenue": 7, "revenue": 12}',
    "key twice in a fenced JSON object": '```json\n{"revenue": 7, "revenue": 12}\n```',
    "key twice in a Python dict": "{'revenue': 7, 'revenue': 12}",
    "key twice, spelled differently": '```json\n{"Revenue": 7, "revenue": 12}\n```',
    "a line, then a JSON block": 'revenue: 7\n```json\n{"revenue": 12}\n```',
    "a JSON block, then a line": '```json\n{"revenue": 12}\n```\nrevenue: 7',
    "a table row and a JSON block": '| revenue | 7 |\n```json\n{"revenue": 12}\n```',
    "a line and a code block": "revenue: 7\n```\nrevenue: 12\n```",
    "two JSON blocks": '```json\n{"revenue": 7}\n```\n```json\n{"revenue": 12}\n```',
    "two answer tags": "<answer>revenue: 7</answer>\n<answer>revenue: 12</answer>",
    "two objects that start lines": 'Here:\n{"revenue": 7}\n{"revenue": 12}',
    "an object that starts a line, then a line": 'Here:\n{"revenue": 12}\nrevenue: 7',
    "two labelled values on one line": "revenue: 12 (FY2023), 7 (FY2022)",
    "two lines with period labels": "revenue FY2022: 7\nrevenue FY2023: 12",
    "a value beside a dated one": "revenue: 7 12 March 2024",
}


@pytest.mark.parametrize("answer", TWO_VALUES.values(), ids=TWO_VALUES.keys())
def test_two_different_values_for_one_name_commit_to_neither(answer):
    result = score(answer)
    assert result.status == "scored" and result.reward == 0.0 and not result.passed, result.detail
    assert "different values" in result.feedback or "exactly one number" in result.feedback, result.feedback


def test_the_feedback_names_the_two_values():
    result = score('revenue: 7\n```json\n{"revenue": 12}\n```')
    assert "revenue: gave 2 different values (7, 12)" in result.feedback


BOUNDS = ["revenue >= 12", "revenue: >= 12", "revenue \u2265 12", "revenue < 13", "revenue > 11", "revenue: at least 12",
          "revenue: at most 12", "revenue: between 10 and 20", "revenue: ~12", "revenue ~ 12", "revenue: \u224812",
          "revenue is more than 11", "revenue: up to 12", "revenue: 12 or more", "revenue: 12+", "revenue: about 12",
          "revenue: approximately 12", "revenue: 12 (approx.)", "revenue: 12 or so", "revenue: 12 +/- 1", '{"revenue": ">= 12"}', '{"revenue": "at least 12"}', '{"revenue": "~12"}']  # fmt: skip


@pytest.mark.parametrize("answer", BOUNDS)
def test_a_bound_or_an_approximation_is_not_a_value(answer):
    result = score(answer)
    assert result.status == "scored" and not result.passed, result.detail
    assert "bound or an approximation" in result.feedback, result.feedback


SAME_VALUE = [
    "revenue: 12\nrevenue: 12.0",
    'revenue: 12\n```json\n{"revenue": 12.0}\n```',
    '```json\n{"revenue": 12, "revenue": 12.0}\n```',
    '<answer>revenue: 12</answer> <answer>{"revenue": 12}</answer>',
    'Revenue is reported in EUR thousands.\n```json\n{"revenue": 12}\n```',
    'Revenue = 12\n\n```json\n{\n  "revenue": 12,\n  "cost": 5\n}\n```',
    'Here are the figures:\n{"revenue": 12, "net_income": -20}',
]


@pytest.mark.parametrize("answer", SAME_VALUE)
def test_the_same_value_stated_twice_is_one_value(answer):
    assert score(answer).passed, score(answer).detail


LABELLED = [
    ("revenue: 1,234 FY2023", 1234),
    ("revenue: 12.5 (FY24)", 12.5),
    ("revenue: 12.5 in fiscal 2023", 12.5),
    ("revenue: 12.5 in fiscal year 2023", 12.5),
    ("revenue: 12.5 Q3 2024", 12.5),
    ("revenue: 12.5 (Q3 FY24)", 12.5),
    ("revenue: 12.5 for 2023", 12.5),
    ("revenue: 12.5 (2023)", 12.5),
    ("revenue: $12.5 million in FY 2023", 12.5),
    ("revenue (FY2023): 12.5", 12.5),
    ("Q3 2024 revenue: 12.5", 12.5),
    ("| revenue FY2023 | 12.5 |", 12.5),
    ('{"revenue": "1,234 FY2023"}', 1234),
    ('{"revenue": "12.5 (FY24)"}', 12.5),
    ("revenue: 12.5 FY2023/24", 12.5),
    ("revenue: 12.5 as of Dec 31, 2023", 12.5),
    ("revenue: 12.5 for the year ended 31 March 2024", 12.5),
    ("revenue: 12.5 March 2024", 12.5),
    ("revenue: 12.5 (2023-12-31)", 12.5),
]


@pytest.mark.parametrize(("answer", "value"), LABELLED)
def test_a_period_label_next_to_a_value_is_a_label(answer, value):
    result = score(answer, gold={"revenue": value})
    assert result.passed, result.detail


def test_a_name_that_holds_a_period_still_matches_its_own_lines_first():
    gold = {"revenue_2023": 12, "revenue_2022": 7}
    assert score("Revenue 2023: 12\nRevenue 2022: 7", gold=gold).passed
    assert extract_named_values("revenue: 12 FY2023", ["revenue"]) == {"revenue": [[12.0]]}


DOCUMENT = "| EUR thousands | FY2024 |\n|---|---:|\n| Revenue | 120,000 |\n| Cost of sales | 70,000 |"


def doc_score(answer: dict):
    task = Task(
        id="d",
        domain="financial_docs",
        prompt=DOCUMENT,
        verifier={"kind": "document_fields"},
        gold={"revenue": 120000, "cost_of_sales": 70000},
    )
    text = "```json\n" + json.dumps(answer) + "\n```"
    return verify(task, Response(id="r", task_id="d", response=text))


@pytest.mark.parametrize("bound", [">= 120,000", "at least 120000", "~120000", "about 120,000", "120,000+"])
def test_document_fields_refuse_a_bound_in_place_of_a_figure(bound):
    result = doc_score({"revenue": bound, "cost_of_sales": 70000})
    assert result.reward == 0.5 and "bound or an approximation" in result.feedback, result.detail


def test_document_fields_read_a_period_label_as_a_label():
    assert doc_score({"revenue": "120,000 FY2024", "cost_of_sales": "70,000 (FY24)"}).passed
    assert not doc_score({"revenue": "120,000 FY2024, 100,000 FY2023", "cost_of_sales": 70000}).passed


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "answer",
    ["revenue: " + "FY2023 " * 12_000, '{"revenue": "' + "FY2023 " * 12_000 + '"}', "revenue: " + "1 ( " * 20_000],
    ids=["labels on a line", "labels in a JSON string", "numbers and brackets"],
)
def test_hostile_runs_of_labels_are_scored_not_stalling_the_grader(answer):
    result = score(answer)
    assert result.status == "scored" and not result.passed
