"""The reasoning_gym kind: gold answers pass under each generator's own scorer; hedges fail."""

from __future__ import annotations

import pytest

from veriloop.core import Response, Task
from veriloop.tasks import import_tasks
from veriloop.verifiers import verify

GENERATORS = [
    "basic_arithmetic",
    "chain_sum",
    "leg_counting",
    "gcd",
    "word_sorting",
    "spell_backward",
    "letter_counting",
    "number_sorting",
    "caesar_cipher",
    "fraction_simplification",
    "arc_1d",
    "mini_sudoku",
    "countdown",
    "family_relationships",
    "simple_equations",
]


def respond(task: Task, text: str):
    return verify(task, Response(id="r", task_id=task.id, response=text))


@pytest.mark.parametrize("name", GENERATORS)
def test_gold_answers_pass_their_own_scorer(name):
    tasks = import_tasks("reasoning-gym", dataset=name, size=3, seed=11)
    assert len(tasks) == 3 and all(t.gold is not None for t in tasks)
    for task in tasks:
        plain = respond(task, str(task.gold))
        assert plain.passed and plain.reward == 1.0, (task.id, plain.detail)
        assert respond(task, f"Reasoning...\n<answer>{task.gold}</answer>").passed


def test_wrong_and_hedged_answers():
    task = import_tasks("reasoning-gym", dataset="basic_arithmetic", size=1, seed=3)[0]
    wrong = respond(task, "<answer>123456789</answer>")
    assert not wrong.passed and wrong.reward < 1.0 and "not correct" in wrong.feedback
    hedged = respond(task, f"<answer>{task.gold}</answer> or <answer>123456789</answer>")
    assert hedged.reward == 0.0 and "several different answers" in hedged.detail


def test_binary_and_answer_tag_modes():
    task = import_tasks("reasoning-gym", dataset="spell_backward", size=1, seed=5)[0]
    strict = task.model_copy(update={"verifier": {**task.verifier, "extract": "answer_tag"}})
    assert respond(strict, str(task.gold)).reward == 0.0
    binary = task.model_copy(update={"verifier": {**task.verifier, "binary": True}})
    assert respond(binary, f"{task.gold} {task.gold}").reward in (0.0, 1.0)


def test_a_task_set_from_another_version_is_an_infra_error():
    task = import_tasks("reasoning-gym", dataset="gcd", size=2, seed=1)[0]
    moved = task.model_copy(update={"verifier": {**task.verifier, "index": 1}})
    result = respond(moved, str(task.gold))
    assert result.status == "infra_error" and "different question" in result.detail
