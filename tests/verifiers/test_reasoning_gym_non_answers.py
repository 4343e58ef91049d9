"""reasoning-gym answers that answer nothing earn nothing; answers a scorer cannot read score 0.

Many reasoning-gym scorers pay partial credit to text that says nothing about the problem:
knights_knaves pays 0.65 for its own question given back, spell_backward 0.2 for "the answer is
the answer", advanced_geometry 0.01 for anything at all. Non-answers are refused before scoring,
and a draw whose scorer pays any probe non-answer keeps no partial credit unless the task opts in.
"""

from __future__ import annotations

import re

import pytest

from veriloop.core import Response, Task
from veriloop.tasks import import_tasks
from veriloop.verifiers import verify
from veriloop.verifiers.answers._commitment import commitment_problem, non_answers
from veriloop.verifiers.answers._reasoning_gym_check import _unparsable, entry_for

QUESTION = "Find the GCD of 12 and 24.\n\nGive only your final answer inside <answer></answer>."


def respond(task: Task, text: str):
    return verify(task, Response(id="r", task_id=task.id, response=text))


def first(name: str, seed: int = 1, **options) -> Task:
    return import_tasks("reasoning-gym", dataset=name, size=1, seed=seed, **options)[0]


def question_of(task: Task) -> str:
    return task.prompt.rsplit("\n\n", 1)[0]


def non_answers_to(task: Task) -> list[str]:
    question = question_of(task)
    numbers = " ".join(re.findall(r"-?\d+(?:\.\d+)?", question))
    return [question, question.splitlines()[0], numbers, "x = x", "the answer is the answer", "y equals y", "None", "."]


@pytest.mark.parametrize(
    "name", ["knights_knaves", "spell_backward", "gcd", "palindrome_generation", "advanced_geometry", "maze"]
)
def test_non_answers_score_zero(name):
    task = first(name)
    for text in non_answers_to(task):
        if not text.strip():
            continue
        score = respond(task, f"<answer>{text}</answer>")
        assert score.status == "scored" and score.reward == 0.0, (text[:60], score.detail)
    assert respond(task, f"<answer>{task.gold}</answer>").reward == 1.0


def test_a_restated_question_collected_partial_credit_from_the_raw_scorer():
    task = first("knights_knaves")
    raw = task.model_copy(update={"verifier": {**task.verifier, "raw_scorer": True}})
    assert respond(raw, f"<answer>{question_of(task)}</answer>").reward > 0.5
    refused = respond(task, f"<answer>{question_of(task)}</answer>")
    assert refused.reward == 0.0 and "question's own text" in refused.detail


def test_partial_credit_is_off_where_the_scorer_pays_non_answers_unless_asked_for():
    task = first("spell_backward")
    wrong = respond(task, "<answer>banana</answer>")  # the default scorer pays len(overlap)-style credit
    assert wrong.status == "scored" and wrong.reward == 0.0 and "partial credit is off" in wrong.detail
    opted = first("spell_backward", partial_credit="on")
    assert opted.verifier["partial_credit"] == "on"
    assert 0.0 < respond(opted, "<answer>banana</answer>").reward < 1.0
    assert respond(opted, "<answer>the answer is the answer</answer>").reward == 0.0  # refused in any case


def test_partial_credit_stays_where_no_non_answer_earns_any():
    task = first("string_insertion", seed=2)
    partly = respond(task, f"<answer>{list(str(task.gold))}</answer>")
    assert partly.status == "scored" and 0.0 < partly.reward < 1.0, partly.detail


def test_what_commits_to_no_solution():
    for text in ("", " . ", "None", "N/A", "unknown", "x = x", "the answer is the answer", "A is A.", "[12, 24]"):
        assert commitment_problem(text, QUESTION, "12"), text
    assert commitment_problem("Find the GCD of 12 and 24", QUESTION, "12") == "the question's own text given back"
    for text in ("12", "6", "12 + 24", "x = 12", "2+2 = 2*2", "the gcd is 12"):
        assert commitment_problem(text, QUESTION, "12") is None, text


def test_a_rule_that_would_refuse_the_gold_is_skipped():
    sorting = "Sort these numbers in ascending order: 1, 2, 3"
    assert commitment_problem("1, 2, 3", sorting, None) is not None
    assert commitment_problem("1, 2, 3", sorting, "1, 2, 3") is None  # an already sorted list
    assert commitment_problem("[1, 2, 3]", sorting, "1, 2, 3") is None
    assert commitment_problem("None", "Which of these is prime? 4, 6", "None") is None


def test_the_probes_are_non_answers():
    for what, text in non_answers(QUESTION):
        assert commitment_problem(text, QUESTION, "12") is not None, what


def test_an_answer_the_scorer_cannot_read_scores_zero_not_infra_error():
    task = first("prime_factorization")
    for text in ("((]] garbage", "banana", "[[1, 2], [3"):
        score = respond(task, f"<answer>{text}</answer>")
        assert score.status == "scored" and score.reward == 0.0, score.detail
        assert "could not read the answer" in score.detail and "form the question asks" in score.feedback
    boxnet = first("boxnet")
    score = respond(boxnet, "<answer>7</answer>")  # a number where the scorer wants a list of actions
    assert score.status == "scored" and score.reward == 0.0, score.detail
    assert respond(task, f"<answer>{task.gold}</answer>").reward == 1.0


def test_a_broken_scorer_stays_an_infra_error():
    verifier = first("prime_factorization").verifier
    key = ("prime_factorization", "{}", verifier["seed"], verifier["size"], 0)
    entry = entry_for("prime_factorization", {}, verifier["seed"], verifier["size"], 0)
    with pytest.raises(ModuleNotFoundError):
        _unparsable(key, entry, ModuleNotFoundError("No module named 'sympy'"))
    with pytest.raises(ValueError, match="gold answer too"):
        _unparsable(key, {**entry, "answer": "not a factorization"}, ValueError("invalid literal"))
    assert "invalid literal" in _unparsable(key, entry, ValueError("invalid literal"))


def test_a_worker_that_dies_is_an_infra_error():
    task = first("string_insertion", seed=2)
    raw = task.model_copy(update={"verifier": {**task.verifier, "raw_scorer": True}})
    score = respond(raw, "<answer>__import__('os')._exit(3)</answer>")
    assert score.status == "infra_error" and "without a reply" in score.detail
    assert respond(task, f"<answer>{task.gold}</answer>").reward == 1.0


def test_a_draw_is_judged_by_its_first_entries_not_only_by_the_task_itself():
    # knights_knaves pays for its own question on few entries: in this draw on entry 7, not on entry 0.
    tasks = import_tasks("reasoning-gym", dataset="knights_knaves", size=8, seed=5)
    assert tasks[0].gold == "Oliver is a pioneer, and Zoey is a laggard."
    half_right = respond(tasks[0], "<answer>Oliver is a pioneer, and Zoey is a pioneer.</answer>")
    assert half_right.reward == 0.0 and "on entry 7" in half_right.detail, half_right.detail
    opted = tasks[0].model_copy(update={"verifier": {**tasks[0].verifier, "partial_credit": "on"}})
    assert respond(opted, "<answer>Oliver is a pioneer, and Zoey is a pioneer.</answer>").reward == pytest.approx(0.65)
