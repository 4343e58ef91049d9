"""The audit's answers that state two things at once: a lenient reader, which keeps the one
statement that matches, credits every one of them; the numeric, document_fields and math kinds
credit none, and ``veriloop audit`` reports nothing rewarded."""

from __future__ import annotations

import ast
import json
import re
from fractions import Fraction

import pytest

from veriloop.core import Response, Task
from veriloop.verifiers import audit_tasks, verify
from veriloop.verifiers.audit._exploits import exploits_for

NUMERIC_TECHNIQUES = {
    "every name twice in one JSON object, the gold last",
    "every name twice in a Python dict, the gold last",
    "wrong lines beside a JSON block of the gold",
    "a wrong answer tag, then the gold one",
    "every value '>=' the gold",
    "every value 'at least' the gold",
    "every value '~' the gold",
    "every value the gold 'or more'",
}
DOCUMENT_TECHNIQUES = {"every value a bound that holds the gold", "every value 'about' the gold"}
MATH_TECHNIQUES = {
    "an equation of a wrong number and the gold",
    "x equal to a wrong number and the gold",
    "a sum worth a wrong number set equal to the gold",
}


def lenient_figures(response: str, names: list[str]) -> dict[str, float]:
    """What a lenient reader takes each name to be: the last answer tag, one JSON object (the
    last copy of a repeated key), else the first number after the name on its last line."""
    tags = re.findall(r"<answer>(.*?)</answer>", response, re.DOTALL)
    scope = tags[-1] if tags else response
    fenced = re.findall(r"```(?:json)?\n(.*?)```", scope, re.DOTALL)
    text = (fenced[-1] if fenced else scope).strip()
    if text.startswith("{"):
        try:
            obj = json.loads(text)
        except ValueError:
            obj = ast.literal_eval(text)
        return {name: float(re.findall(r"-?\d+\.?\d*", str(obj[name]))[0]) for name in names if name in obj}
    found = {}
    for line in scope.splitlines():
        for name in names:
            if line.startswith(name) and re.search(r"\d", line):
                found[name] = float(re.findall(r"-?\d+\.?\d*", line[len(name) :])[0])
    return found


def lenient_math(response: str) -> Fraction:
    """What a matcher that reads only the last side of a boxed equation takes the answer to be."""
    boxed = re.search(r"\\boxed\{(.*)\}", response)[1]
    return Fraction(boxed.rpartition("=")[2].strip())


NUMERIC_GOLD = {"revenue": 1234.5, "net_income": -20.0}


def _tasks() -> list[Task]:
    numeric = [
        Task(id=f"n{i}", domain="tables", prompt="p", verifier={"kind": "numeric"}, gold=NUMERIC_GOLD) for i in (1, 2)
    ]
    document = Task(
        id="d1",
        domain="financial_docs",
        prompt="| EUR thousands | FY2024 |\n| Revenue | 1,200 |",
        verifier={"kind": "document_fields"},
        gold={"revenue": 1200},
    )
    math = [
        Task(id=f"m{gold}", domain="math", prompt="p", verifier={"kind": "math"}, gold=gold) for gold in ("42", "-3")
    ]
    return [*numeric, document, *math]


def _named(task: Task, names: set[str]):
    chosen = [e for e in exploits_for(task, []) if e.name in names]
    assert {e.name for e in chosen} == names
    return chosen


@pytest.mark.parametrize("task", [t for t in _tasks() if t.verifier_kind != "math"], ids=lambda t: t.id)
def test_a_lenient_reader_credits_each_figure_technique_and_the_verifier_does_not(task):
    names = NUMERIC_TECHNIQUES if task.verifier_kind == "numeric" else DOCUMENT_TECHNIQUES
    for exploit in _named(task, names):
        assert lenient_figures(exploit.response, list(task.gold)) == pytest.approx(task.gold), exploit.name
        score = verify(task, Response(id="r", task_id=task.id, response=exploit.response))
        assert score.status == "scored" and score.reward == 0.0, (exploit.name, score.detail)


@pytest.mark.parametrize("task", [t for t in _tasks() if t.verifier_kind == "math"], ids=lambda t: t.id)
def test_a_last_side_matcher_credits_each_equation_technique_and_the_verifier_does_not(task):
    for exploit in _named(task, MATH_TECHNIQUES):
        assert lenient_math(exploit.response) == Fraction(task.gold), exploit.name
        score = verify(task, Response(id="r", task_id=task.id, response=exploit.response))
        assert score.status == "scored" and score.reward == 0.0, (exploit.name, score.detail)


@pytest.mark.e2e
def test_the_audit_reports_no_answer_that_says_two_things_rewarded():
    report = audit_tasks(_tasks(), repeats=1, threads=2)
    assert not report.gold_failures
    hedging = {row.kind: row for row in report.rows if row.category == "hedging"}
    assert set(hedging) == {"numeric", "document_fields", "math"}
    assert all(row.fooled == 0 and row.max_reward < 1.0 for row in hedging.values()), hedging
    assert all(row.ok for row in report.rows), [row for row in report.rows if not row.ok]
