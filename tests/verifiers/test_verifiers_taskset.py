"""verifiers tasksets: imported and scored in the sandbox, on an environment that holds a real
``verifiers`` 0.4.0 and the taskset of ``examples/verifiers/veriloop-sums``."""

from __future__ import annotations

import pytest

from veriloop.core import Response, Task, UserError
from veriloop.tasks import IMPORTERS
from veriloop.verifiers import verify


def _import(environment: str, **options) -> list[Task]:
    return IMPORTERS.get("verifiers").run({"taskset": "veriloop_sums", "environment": environment, **options})


def _score(task: Task, *turns: str):
    return verify(task, Response(id="r", task_id=task.id, response=turns[-1], turns=turns if len(turns) > 1 else ()))


def test_a_task_without_an_environment_is_an_infra_error():
    task = Task(
        id="t",
        domain="d",
        prompt="What is 1 + 7?",
        verifier={"kind": "verifiers_taskset", "taskset": "veriloop_sums", "data": {"answer": "8"}},
    )
    score = _score(task, "<answer>8</answer>")
    assert (score.status, score.reward) == ("infra_error", None)
    assert "runs on an environment" in score.detail


def test_importing_from_a_missing_environment_names_the_command_that_builds_it(run_cli, tmp_path):
    done = run_cli(
        "tasks",
        "import",
        "verifiers",
        "veriloop_sums",
        "--environment",
        "no-such-env",
        "--out",
        str(tmp_path / "t.jsonl"),
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "veriloop env build" in done.stderr and not (tmp_path / "t.jsonl").exists()


@pytest.mark.e2e
def test_the_taskset_imports_as_tasks_that_keep_their_data(env_with_verifiers):
    tasks = _import(env_with_verifiers.name, skip=1, size=3)
    assert [t.id for t in tasks] == ["veriloop_sums/sum-2-4", "veriloop_sums/sum-3-1", "veriloop_sums/sum-4-8"]
    first = tasks[0]
    assert first.messages() == [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "What is 2 + 4? Give the result inside <answer></answer>."},
    ]
    assert first.environment == env_with_verifiers.name and first.gold is None
    assert first.verifier["data"]["answer"] == "6" and first.verifier["data"]["idx"] == 1
    assert first.metadata["verifiers"]["type"] == "SumsTask"


@pytest.mark.e2e
def test_responses_score_the_tasks_weighted_rewards(env_with_verifiers):
    [task] = _import(env_with_verifiers.name, size=1)  # 1 + 7
    right = _score(task, "<answer>8</answer>")
    assert (right.status, right.reward, right.passed) == ("scored", 1.0, True)
    assert right.environment == env_with_verifiers.hash
    brief_but_wrong = _score(task, "<answer>9</answer>")
    assert (brief_but_wrong.reward, brief_but_wrong.passed) == (0.25, False)
    assert "brief 1x0.25" in brief_but_wrong.detail and "correct 0x0.75" in brief_but_wrong.detail
    hedged = _score(task, "It could be <answer>8</answer> or perhaps <answer>9</answer>, I am not sure")
    assert hedged.reward == 0.0


@pytest.mark.e2e
def test_a_multi_turn_response_is_scored_on_its_turns_in_order(env_with_verifiers):
    [task] = _import(env_with_verifiers.name, size=1)
    assert _score(task, "<answer>9</answer>", "<answer>8</answer>").reward == 1.0  # the last reply counts
    assert _score(task, "<answer>8</answer>", "<answer>9</answer>").reward == 0.25


@pytest.mark.e2e
def test_a_broken_task_or_taskset_is_an_infra_error_and_an_unknown_one_a_user_error(env_with_verifiers):
    [task] = _import(env_with_verifiers.name, size=1)
    broken = task.model_copy(update={"verifier": {**task.verifier, "data": {"prompt": "no answer field"}}})
    score = _score(broken, "<answer>8</answer>")
    assert (score.status, score.reward) == ("infra_error", None)
    assert "answer" in score.detail
    with pytest.raises(UserError, match="taskset 'no_such_taskset'"):
        IMPORTERS.get("verifiers").run({"taskset": "no_such_taskset", "environment": env_with_verifiers.name})
