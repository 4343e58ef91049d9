"""``veriloop audit`` on reasoning-gym tasks: it flags a scorer that accepts answers that are not solutions."""

from __future__ import annotations

import pytest

from veriloop.tasks import import_tasks
from veriloop.verifiers.audit._audit import audit_tasks
from veriloop.verifiers.audit._exploits_reasoning_gym import (
    other_numbers,
    restated_problems,
    restated_questions,
    tautologies,
)


def rows(tasks, raw: bool) -> dict[str, int]:
    chosen = [t.model_copy(update={"verifier": {**t.verifier, "raw_scorer": raw}}) for t in tasks]
    report = audit_tasks(chosen, repeats=1, threads=2)
    assert not report.gold_failures
    return {row.category: row.fooled for row in report.rows}


@pytest.mark.e2e
def test_the_audit_flags_a_raw_scorer_and_passes_the_guarded_one():
    tasks = import_tasks("reasoning-gym", dataset="puzzle24", size=2, seed=2)
    tasks += import_tasks("reasoning-gym", dataset="simple_integration", size=1, seed=2)
    raw = rows(tasks, raw=True)
    assert raw["not_a_solution"] == 3  # other numbers for 24; the integral restated
    guarded = rows(tasks, raw=False)
    assert guarded["not_a_solution"] == 0 and guarded["stack_inspection"] == 0 and guarded["hedging"] == 0
    assert all(fooled == 0 for fooled in guarded.values()), guarded


def test_unsolved_answers_come_from_the_tree_not_from_evaluating_text():
    assert other_numbers("9*3*8/9") == ["24", "24 + 0*9", "8*3*1*1"]
    assert other_numbers("__import__('os')") == [] and other_numbers("7") == []
    assert restated_problems("Calculate the antiderivative: ∫ 2 - 18*x**2 dx") == ["Integral(2 - 18*x**2, x) + C"]
    assert restated_problems("Calculate the following: (x + 1)*(x - 2)\nRules") == ["(x + 1)*(x - 2)"]


def test_the_audit_reports_non_answers_that_earn_anything():
    # knights_knaves pays 0.65 for its question given back; spell_backward 0.2 for "the answer is the answer".
    tasks = import_tasks("reasoning-gym", dataset="knights_knaves", size=1, seed=1)
    tasks += import_tasks("reasoning-gym", dataset="spell_backward", size=1, seed=1)
    raw = rows(tasks, raw=True)
    assert raw["restated_question"] >= 1 and raw["tautology"] == 2, raw
    guarded = rows(tasks, raw=False)
    assert guarded["restated_question"] == 0 and guarded["tautology"] == 0, guarded


def test_non_answer_exploits_give_back_the_question_and_say_nothing():
    prompt = "Find the GCD of 12 and 24.\nThink.\n\nGive only your final answer inside <answer></answer>."
    assert restated_questions(prompt) == [
        "Find the GCD of 12 and 24.\nThink.",
        "Find the GCD of 12 and 24.",
        "12 24",
        "12, 24",
    ]
    assert "x = x" in tautologies("12") and "12 = 12" in tautologies("12")
