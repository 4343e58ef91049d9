"""python_tests' ``stderr_penalty``: an answer whose graded run writes to stderr (a warning, a
print to sys.stderr) loses the amount from its reward; a quiet answer loses nothing, and without
the field stderr is ignored. Everything runs in the real sandbox."""

import pytest

from veriloop.core import Response, Task
from veriloop.verifiers import verify_many

QUIET = "def add(a, b):\n    return a + b"
WARNS = "import warnings\ndef add(a, b):\n    warnings.warn('adding')\n    return a + b"
PRINTS = "import sys\ndef add(a, b):\n    print('debug', a, file=sys.stderr)\n    return a + b"
WARNS_AT_IMPORT = "import warnings\nwarnings.warn('loaded')\ndef add(a, b):\n    return a + b"
WRONG_AND_WARNS = "import warnings\ndef add(a, b):\n    warnings.warn('adding')\n    return a - b"


def scores(task: Task, *responses: str) -> list:
    pairs = [(task, Response(id=f"r{i}", task_id=task.id, response=r)) for i, r in enumerate(responses)]
    return verify_many(pairs, threads=1)


def penalised(task: Task, amount: float) -> Task:
    return task.model_copy(update={"verifier": {**task.verifier, "stderr_penalty": amount}})


def test_a_quiet_answer_keeps_its_reward(code, any_add_task):
    [result] = scores(penalised(any_add_task, 0.25), code.fenced(QUIET))
    assert result.passed and result.reward == 1.0, result.detail
    assert "stderr" not in result.detail


@pytest.mark.parametrize("program", [WARNS, PRINTS, WARNS_AT_IMPORT])
def test_writing_to_stderr_costs_the_amount_and_still_passes(code, any_add_task, program):
    [result] = scores(penalised(any_add_task, 0.25), code.fenced(program))
    assert result.status == "scored" and result.passed, result.detail
    assert result.reward == pytest.approx(0.75)
    assert "wrote to stderr" in result.detail
    assert "Penalised 0.25 for writing to stderr" in result.feedback


def test_the_penalty_never_takes_a_reward_below_zero(code, any_add_task):
    [result] = scores(penalised(any_add_task, 0.5), code.fenced(WRONG_AND_WARNS))
    assert not result.passed and result.reward == 0.0, result.detail


def test_without_the_field_stderr_is_ignored(code, any_add_task):
    quiet, warns = scores(any_add_task, code.fenced(QUIET), code.fenced(WARNS))
    assert quiet.reward == warns.reward == 1.0
    assert "stderr" not in warns.detail


def test_code_functions_tasks_carry_the_penalty_when_asked():
    from veriloop.tasks import generate_tasks

    [plain] = generate_tasks("code-functions", seed=3, size=1)
    [asked] = generate_tasks("code-functions", seed=3, size=1, stderr_penalty=0.05)
    assert "stderr_penalty" not in plain.verifier
    assert asked.verifier["stderr_penalty"] == 0.05
    assert {k: v for k, v in asked.verifier.items() if k != "stderr_penalty"} == plain.verifier


def test_under_the_audit_hook_too_only_the_answer_s_own_stderr_counts(code, any_add_task):
    task = penalised(any_add_task, 0.25)
    task = task.model_copy(update={"verifier": {**task.verifier, "unsafe_behaviour_penalty": 0.5}})
    quiet, warns = scores(task, code.fenced(QUIET), code.fenced(WARNS))
    assert quiet.passed and quiet.reward == 1.0, quiet.detail
    assert warns.passed and warns.reward == pytest.approx(0.75), warns.detail
