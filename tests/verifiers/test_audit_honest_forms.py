"""The audit's honest forms: the gold answer written other ways must pass, and ``veriloop audit``
reports any form a verifier rejects."""

from __future__ import annotations

import json

import pytest

from veriloop.core import Task
from veriloop.verifiers import audit_tasks
from veriloop.verifiers.audit._honest_forms import HONEST_FORMS, HonestForm, honest_forms_for, math_forms, numeric_forms


def _responses(forms: list[HonestForm]) -> dict[str, str]:
    return {form.name: form.response for form in forms}


def test_an_interval_and_the_inequality_it_stands_for_are_each_others_forms():
    assert _responses(math_forms("(2, 5]")) == {
        "boxed": "The answer is $\\boxed{(2, 5]}$.",
        "interval as an inequality": "$\\boxed{2 < x \\le 5}$",
        "interval as membership": "$\\boxed{x \\in (2, 5]}$",
    }
    forms = _responses(math_forms("t \\ge -1"))
    assert forms["inequality as a bare interval"] == "$\\boxed{[-1, \\infty)}$"
    assert forms["inequality as membership"] == "$\\boxed{t \\in [-1, \\infty)}$"
    assert _responses(math_forms("x \\in (-\\infty, 4)"))["interval as an inequality"] == "$\\boxed{x < 4}$"
    assert _responses(math_forms("x \\in (-\\infty, 4)"))["bare interval"] == "$\\boxed{(-\\infty, 4)}$"


def test_whole_numbers_get_a_decimal_point_and_documents_a_fiscal_label():
    assert _responses(math_forms("36"))["whole number with a decimal point"] == "$\\boxed{36.0}$"
    assert "whole number with a decimal point" not in _responses(math_forms("\\frac{1}{2}"))
    forms = _responses(numeric_forms({"revenue": 1234567, "margin": 12.5}))
    assert forms["values followed by a fiscal-year label"] == "revenue: 1234567 FY2024\nmargin: 12.5 FY2024\n"
    assert forms["thousands separators"] == "revenue: 1,234,567\nmargin: 12.5\n"
    assert json.loads(forms["JSON with decimal points"]) == {"revenue": 1234567.0, "margin": 12.5}
    assert "thousands separators" not in _responses(numeric_forms({"margin": 12.5}))


@pytest.fixture
def reworded_exact(monkeypatch):
    """Honest forms for the ``exact`` kind for one test: a lower-cased form (which ``exact``
    rejects when case matters) and the gold with surrounding spaces."""

    def forms(task: Task) -> list[HonestForm]:
        return [HonestForm("lower case", task.gold.lower()), HonestForm("padded", f" {task.gold} ")]

    monkeypatch.setitem(HONEST_FORMS._entries, "exact", forms)


def test_the_audit_reports_each_honest_form_a_verifier_rejects(reworded_exact):
    task = Task(id="capital", domain="d", prompt="p", verifier={"kind": "exact", "case_sensitive": True}, gold="Paris")
    report = audit_tasks([task], repeats=1)
    assert not report.ok
    assert len(report.honest_rejected) == 1
    assert report.honest_rejected[0].startswith("capital: honest form rejected (lower case)")


HONEST_TASKS = [
    Task(id="whole", domain="math", prompt="p", verifier={"kind": "math"}, gold="36"),
    Task(id="interval", domain="math", prompt="p", verifier={"kind": "math"}, gold="(2, 5]"),
    Task(id="chain", domain="math", prompt="p", verifier={"kind": "math"}, gold="2 < x \\le 5"),
    Task(id="ray", domain="math", prompt="p", verifier={"kind": "math"}, gold="x \\ge 3"),
    Task(id="member", domain="math", prompt="p", verifier={"kind": "math"}, gold="x \\in (-\\infty, 4)"),
    Task(
        id="figures", domain="doc", prompt="p", verifier={"kind": "numeric"}, gold={"revenue": 1234567, "margin": 12.5}
    ),
    Task(
        id="record",
        domain="json",
        prompt="p",
        verifier={"kind": "json_schema", "schema": {"type": "object"}, "match_gold": True},
        gold={"count": 36, "name": "a", "items": [1, 2]},
    ),
]


def test_every_honest_form_of_these_gold_answers_passes():
    from veriloop.core import Response
    from veriloop.verifiers import verify_many

    pairs = [
        (task, Response(id=f"{task.id}/{form.name}", task_id=task.id, response=form.response))
        for task in HONEST_TASKS
        for form in honest_forms_for(task)
    ]
    assert len(pairs) >= 20
    failed = [(r.id, s.detail) for (_, r), s in zip(pairs, verify_many(pairs)) if not s.passed]
    assert failed == []
