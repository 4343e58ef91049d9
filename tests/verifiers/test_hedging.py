"""Hedging (several candidate answers, or the right one buried in a list) earns nothing anywhere."""

from __future__ import annotations

import pytest

from veriloop.core import Response, Task
from veriloop.verifiers import verify

CASES = [
    ({"kind": "exact"}, "Paris", ["Paris or Lyon", "Lyon, Paris", "Paris\nLyon"]),
    ({"kind": "exact", "extract": "last_line"}, "Paris", ["Paris\nLyon", "Lyon\nParis or Lyon"]),
    ({"kind": "math"}, "42", ["\\boxed{41} \\boxed{42}", "It is 40, 41 or 42", "Answer: 41; 42", "41 42 43"]),
    ({"kind": "numeric"}, {"total": 42}, ["total: 41 or 42", "total: 41\ntotal: 42", "total: 40-42"]),
]


@pytest.mark.parametrize(("verifier", "gold", "hedges"), CASES, ids=[c[0]["kind"] for c in CASES])
def test_hedges_score_zero(verifier, gold, hedges):
    task = Task(id="t", domain="d", prompt="p", verifier=verifier, gold=gold)
    for hedge in hedges:
        score = verify(task, Response(id="r", task_id="t", response=hedge))
        assert score.status == "scored" and score.reward == 0.0, (hedge, score.detail)
