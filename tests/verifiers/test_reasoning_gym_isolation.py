"""reasoning-gym scorers that evaluate answers: attacks fail, weak scorers are made strict, honest answers pass.

Each attack is checked from the host side (files, the next check's score), and each is
followed by an honest check on the same pool that must be unaffected.
"""

from __future__ import annotations

import os
import re

import pytest

from veriloop.core import Response, Task
from veriloop.tasks import import_tasks
from veriloop.verifiers import verify

# polynomial_multiplication is absent: its draw depends on the interpreter's hash seed, so a
# task built in one process can differ from the entry another rebuilds (an infra_error, by design).
EVALUATING = [
    "countdown",
    "puzzle24",
    "simple_integration",
    "string_insertion",
    "spiral_matrix",
    "binary_matrix",
    "n_queens",
]


def respond(task: Task, text: str):
    return verify(task, Response(id="r", task_id=task.id, response=text))


def first(name: str, seed: int = 2) -> Task:
    return import_tasks("reasoning-gym", dataset=name, size=1, seed=seed)[0]


@pytest.mark.parametrize("name", EVALUATING)
def test_honest_answers_to_evaluating_scorers_still_pass(name):
    for task in import_tasks("reasoning-gym", dataset=name, size=3, seed=7):
        score = respond(task, f"<answer>{task.gold}</answer>")
        assert score.status == "scored" and score.passed and score.reward == 1.0, (task.id, score.detail)


def test_reading_the_target_from_the_scorers_frame_is_refused():
    # string_insertion's scorer runs eval(answer) inside score_answer, whose locals hold the gold.
    task = first("string_insertion")
    for attack in ("list(oracle_answer)", "[c for c in __import__('sys')._getframe(1).f_locals['entry']['answer']]"):
        score = respond(task, f"<answer>{attack}</answer>")
        assert score.status == "scored" and score.reward == 0.0, score.detail
    board = first("n_queens")
    attack = "[row.split() for row in valid_solutions[0].split(chr(10))]"
    assert respond(board, f"<answer>{attack}</answer>").reward == 0.0
    target = first("countdown")
    attack = "__import__('inspect').currentframe().f_back.f_back.f_locals['entry']['metadata']['target']"
    assert respond(target, f"<answer>{attack}</answer>").reward == 0.0
    assert respond(task, f"<answer>{task.gold}</answer>").reward == 1.0
    as_list = respond(task, f"<answer>{list(str(task.gold))}</answer>")  # the scorer's own fallback: a literal
    assert as_list.status == "scored" and 0.0 < as_list.reward < 1.0


def test_patching_the_scorer_does_not_reach_the_next_check(tmp_path):
    task = first("n_queens")
    for patch in (
        "setattr(type(self), 'score_answer', lambda *args: 1.0)",
        "__import__('builtins').__dict__.__setitem__('eval', lambda *args: None)",
    ):
        respond(task, f"<answer>{patch}</answer>")
    wrong = respond(task, "<answer>Q Q Q</answer>")
    assert wrong.status == "scored" and wrong.reward == 0.0
    assert respond(task, f"<answer>{task.gold}</answer>").reward == 1.0


def test_an_answer_cannot_write_a_host_file(tmp_path):
    planted = tmp_path / "planted"
    task = first("spiral_matrix")
    score = respond(task, f"<answer>open({str(planted)!r}, 'w').write('x')</answer>")
    assert score.reward == 0.0 and not planted.exists()


def test_arithmetic_puzzles_must_use_exactly_the_given_numbers():
    task = first("puzzle24")
    numbers = sorted(int(n) for n in re.search(r"Make 24 using ([\d, ]+)\.", task.prompt).group(1).split(","))
    other = "6*4*1*1" if numbers != [1, 1, 4, 6] else "8*3*1*1"
    import reasoning_gym

    entry = reasoning_gym.create_dataset("puzzle24", seed=2, size=1)[0]
    assert reasoning_gym.create_dataset("puzzle24", seed=2, size=1).score_answer(other, entry) == 1.0  # the raw scorer
    for unsolved in (other, "24", f"{task.gold} + 0*1", f"({task.gold}) * 1"):
        score = respond(task, f"<answer>{unsolved}</answer>")
        assert score.reward == 0.0 and "given numbers" in score.detail, (unsolved, score.detail)
    assert respond(task, f"<answer>{task.gold}</answer>").reward == 1.0
    countdown = first("countdown")
    target = re.search(r"\b(\d+)\b", countdown.prompt.split("Using")[0] + countdown.prompt).group(1)
    assert respond(countdown, f"<answer>{target}</answer>").reward == 0.0


def test_restating_the_problem_is_not_an_answer():
    task = first("polynomial_multiplication")
    task = task.model_copy(update={"verifier": {**task.verifier, "check_question": False}})
    product = re.search(r": (\(.+)", task.prompt).group(1).strip()
    score = respond(task, f"<answer>{product}</answer>")
    assert score.reward == 0.0 and "refused" in score.detail
    integral = first("simple_integration")
    integrand = re.search(r"∫ (.+) dx", integral.prompt).group(1)
    assert respond(integral, f"<answer>Integral({integrand}, x) + C</answer>").reward == 0.0
    assert respond(integral, f"<answer>{integral.gold}</answer>").reward == 1.0


def test_power_towers_are_refused_not_timed_out():
    task = first("simple_integration")
    for tower in ("x**9**9**9", "x**(9**9)", "9**999999*x", "x**(99999/2)"):
        score = respond(task, f"<answer>{tower}</answer>")
        assert score.status == "scored" and score.reward == 0.0 and "exponents" in score.detail, score.detail


def test_the_raw_scorer_stays_available_in_its_box():
    task = first("puzzle24")
    raw = task.model_copy(update={"verifier": {**task.verifier, "raw_scorer": True}})
    assert respond(raw, "<answer>list(oracle_answer) or 24</answer>").status == "scored"
    assert not os.path.exists("/tmp/veriloop-raw-scorer-probe")
