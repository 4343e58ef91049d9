"""The math exploits of the audit catalogue: each fails on the math kind, and the gold passes."""

from __future__ import annotations

import pytest

from veriloop.core import Response, Task
from veriloop.verifiers import verify
from veriloop.verifiers.audit._exploits import exploits_for


@pytest.mark.e2e
@pytest.mark.parametrize("gold", ["1591", "0.5", "-12"])
def test_math_exploits_all_fail_and_the_gold_passes(gold):
    task = Task(id="t", domain="math", prompt="p", verifier={"kind": "math"}, gold=gold)
    exploits = exploits_for(task, [])
    names = {exploit.name for exploit in exploits}
    assert {"the gold as a sum to evaluate", "the gold as a percentage of itself"} <= names
    for exploit in exploits:
        result = verify(task, Response(id="r", task_id="t", response=exploit.response))
        assert not result.passed, (exploit.name, exploit.response, result.detail)
    assert verify(task, Response(id="r", task_id="t", response=f"\\boxed{{{gold}}}")).passed
