"""reasoning-gym tasks refuse hedges by default: credit goes to one committed answer only.

reasoning-gym's default scorer gives ``len(gold) / len(answer)`` to any answer that contains
the gold, and fuzzy scorers give near-full credit to the gold followed by junk; both pay for
listing candidates. The lenient behaviour stays available behind ``hedges: lenient``.
"""

from __future__ import annotations

import pytest

from veriloop.core import Response, Task
from veriloop.tasks import import_tasks
from veriloop.verifiers import verify
from veriloop.verifiers.answers._reasoning_gym import buried_gold

SHORT_GOLDS = ["basic_arithmetic", "leg_counting", "gcd", "letter_counting", "spell_backward"]


def respond(task: Task, text: str):
    return verify(task, Response(id="r", task_id=task.id, response=text))


def hedges(gold: str) -> list[str]:
    return [
        f"<answer>{gold} 7 8 9</answer>",
        f"<answer>It is 11 or {gold}</answer>",
        f"<answer>The answer is {gold}.</answer>",
        f"<answer>{gold}, 12, 13</answer>",
        f"Maybe 11.\nOr maybe {gold}.",
    ]


@pytest.mark.parametrize("name", SHORT_GOLDS)
def test_hedges_score_zero_by_default(name):
    task = import_tasks("reasoning-gym", dataset=name, size=1, seed=1)[0]
    assert task.verifier["hedges"] == "refuse"
    for hedge in hedges(str(task.gold)):
        score = respond(task, hedge)
        assert score.status == "scored" and score.reward == 0.0, (hedge, score.detail)
    assert respond(task, f"Working...\n<answer>{task.gold}</answer>").reward == 1.0


def test_a_long_gold_among_other_words_gets_no_partial_credit():
    task = import_tasks("reasoning-gym", dataset="caesar_cipher", size=1, seed=1)[0]
    assert len(str(task.gold).split()) > 3
    assert respond(task, f"<answer>{task.gold} 7 8 9</answer>").reward == 0.0
    assert respond(task, f"<answer>{task.gold}</answer>").reward == 1.0


def test_the_verifier_default_refuses_hedges_without_the_importers_field():
    task = import_tasks("reasoning-gym", dataset="gcd", size=1, seed=1)[0]
    bare = task.model_copy(update={"verifier": {k: v for k, v in task.verifier.items() if k != "hedges"}})
    assert respond(bare, f"<answer>{task.gold} 7 8 9</answer>").reward == 0.0


def test_lenient_hedges_keep_the_scorers_partial_credit():
    task = import_tasks("reasoning-gym", dataset="gcd", size=1, seed=1, hedges="lenient")[0]
    assert task.verifier["hedges"] == "lenient"
    assert 0.0 < respond(task, f"<answer>{task.gold} 7 8 9</answer>").reward < 1.0


def test_what_counts_as_the_gold_buried_among_other_words():
    assert buried_gold("41 42", "42") and buried_gold("x = 42", "42") and buried_gold("<b>42</b>", "42")
    assert not buried_gold("42", "42") and not buried_gold(" 42 ", "42")
    assert not buried_gold("420", "42") and not buried_gold("4.2", "2") and not buried_gold("42.5", "42")
    assert buried_gold("The answer is 42.", "42") and not buried_gold("42.", "42")
