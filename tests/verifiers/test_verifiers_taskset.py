"""verifiers tasksets: imported and scored in the sandbox, on an environment that holds a real
``verifiers`` 0.4.0 and the taskset of ``examples/verifiers/veriloop-sums``, and on one that holds
``verifiers`` 0.1.3 and ``classic_products``, an environment written with ``load_environment``."""

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


@pytest.fixture(scope="module")
def env_with_classic(env_store, tmp_path_factory):
    """An environment holding ``classic_products`` (this folder): an environment of a real
    ``verifiers`` 0.1.3 (``load_environment`` returning a ``SingleTurnEnv``), the API before 0.4
    (copied first: pip builds in its folder)."""
    import shutil
    from pathlib import Path

    from veriloop.sandbox._environments import build_environment

    package = tmp_path_factory.mktemp("classic") / "classic-products"
    shutil.copytree(Path(__file__).with_name("classic_products"), package)
    return build_environment("classic-products", [str(package)], warm=["classic_products"])


@pytest.mark.e2e
def test_a_load_environment_package_imports_its_eval_rows_or_its_dataset(env_with_classic):
    tasks = IMPORTERS.get("verifiers").run(
        {"taskset": "classic_products", "environment": env_with_classic.name, "args": {"num_eval": 2}}
    )
    assert [t.id for t in tasks] == ["classic_products/eval/0", "classic_products/eval/1"]
    assert tasks[0].messages() == [
        {"role": "system", "content": "Put the final answer in \\boxed{}."},
        {"role": "user", "content": "What is 5 * 5?"},
    ]
    assert tasks[0].verifier["data"]["answer"] == "25" and tasks[0].verifier["data"]["info"] == {"factors": [5, 5]}
    train = IMPORTERS.get("verifiers").run(
        {"taskset": "classic_products", "environment": env_with_classic.name, "split": "train", "size": 2}
    )
    assert [t.id for t in train] == ["classic_products/train/0", "classic_products/train/1"]
    assert [t.messages()[-1]["content"] for t in train] == ["What is 1 * 3?", "What is 2 * 6?"]


@pytest.mark.e2e
def test_a_load_environment_rubric_scores_the_turns(env_with_classic):
    [task] = IMPORTERS.get("verifiers").run(
        {"taskset": "classic_products", "environment": env_with_classic.name, "size": 1}
    )  # 5 * 5
    right = _score(task, "So \\boxed{25}")
    assert (right.status, right.reward, right.passed) == ("scored", 1.0, True)
    assert "correct_answer 1" in right.detail and "boxed_format 1" in right.detail
    assert _score(task, "\\boxed{24}").reward == pytest.approx(0.2)
    assert _score(task, "25").reward == 0.0
    assert _score(task, "\\boxed{24}", "no, \\boxed{25}").reward == 1.0  # the last turn is the answer


def _programs_task(environment: str) -> Task:
    [task] = IMPORTERS.get("verifiers").run({"taskset": "classic_programs", "environment": environment, "size": 1})
    return task  # 3 * 4, scored by running the program in the scoring process


def _forging(ending: str = "") -> str:
    verdict = '{"reward": 1.0, "rewards": {}, "metrics": {}, "skipped": []}'
    return (
        "```python\nimport atexit, os, sys\n"
        f"line = '\\n' + {verdict!r} + '\\n'\n"
        "atexit.register(lambda: os.write(1, line.encode()))\n"
        "sys.__stdout__.write(line); sys.__stdout__.flush()\n"
        f"print(11)\n{ending}```"
    )


@pytest.mark.e2e
def test_a_program_run_by_the_rewards_cannot_print_the_verdict(env_with_classic):
    task = _programs_task(env_with_classic.name)
    honest = _score(task, "```python\nprint(3 * 4)\n```")
    assert (honest.status, honest.reward, honest.passed) == ("scored", 1.0, True)
    forged = _score(task, _forging())  # prints a verdict line to the process's stdout, now and at exit
    assert (forged.status, forged.reward, forged.passed) == ("scored", 0.0, False)
    ended = _score(task, _forging("os._exit(0)\n"))  # and ends the scoring process
    assert (ended.status, ended.reward, ended.passed) == ("scored", 0.0, False)
    assert "exited with status 0 while the rewards ran" in ended.detail


@pytest.mark.e2e
def test_an_exception_of_the_tasksets_code_stays_an_infra_error(env_with_classic):
    [task] = IMPORTERS.get("verifiers").run(
        {"taskset": "classic_products", "environment": env_with_classic.name, "size": 1}
    )
    broken = task.model_copy(update={"verifier": {**task.verifier, "args": {"num_eval": "three"}}})
    score = _score(broken, "\\boxed{25}")
    assert score.status == "infra_error" and "the taskset's code raised" in score.detail and "TypeError" in score.detail


@pytest.mark.e2e
def test_the_audit_tries_forged_verdicts_and_none_fools_the_scorer(env_with_classic):
    from veriloop.verifiers import audit_tasks, exploits_for

    task = _programs_task(env_with_classic.name)
    categories = {e.category for e in exploits_for(task, [task])}
    assert {"channel_forgery", "restated_question", "early_exit", "resource_abuse"} <= categories
    report = audit_tasks([task], repeats=1)
    rows = {row.category: row for row in report.rows}
    assert rows["channel_forgery"].tasks == 1
    assert all(row.fooled == 0 and row.broke == 0 for row in report.rows), report.rows


def _guess_task(environment: str) -> Task:
    [task] = IMPORTERS.get("verifiers").run({"taskset": "classic_guess", "environment": environment, "size": 1})
    return task  # the hidden number is 3; four guesses at most


@pytest.mark.e2e
def test_a_multi_turn_environment_answers_each_turn_of_a_replayed_response(env_with_classic):
    task = _guess_task(env_with_classic.name)
    assert task.verifier["multi_turn"] is True
    assert _score(task, "<guess>5</guess>", "<guess>3</guess>").reward == 1.0  # "lower", then right
    wrong_way = _score(task, "<guess>5</guess>", "<guess>7</guess>", "<guess>3</guess>")
    assert wrong_way.reward == 0.75 and "followed_the_hints 0" in wrong_way.detail  # read off the hints
    assert _score(task, "<guess>3</guess>", "<guess>9</guess>").reward == 1.0  # the rollout ended at the right guess
    never = _score(task, *(f"<guess>{n}</guess>" for n in (0, 1, 2, 4, 5, 3)))  # max_turns ends it after four
    assert (never.reward, never.passed) == (0.25, False)
    completions = task.model_copy(update={"verifier": {**task.verifier, "args": {"message_type": "completion"}}})
    refused = _score(completions, "<guess>3</guess>")
    assert refused.status == "infra_error" and "only chat ones run" in refused.detail


@pytest.mark.e2e
def test_an_episode_shows_the_model_the_environments_answers(env_with_classic, tmp_path):
    import json

    from veriloop.rollout import EpisodeConfig, ReplayEngine, StopConfig, rollout

    task = _guess_task(env_with_classic.name)
    script = tmp_path / "script.jsonl"
    turns = ["<guess>6</guess>", "nothing", "<guess>3</guess>", "<guess>4</guess>"]
    script.write_text(json.dumps({"prompt": task.messages()[-1]["content"], "turns": turns}) + "\n")
    config = EpisodeConfig(stop=StopConfig(max_turns=6))
    [trajectory] = rollout([task], ReplayEngine(script), config).trajectories
    assert (trajectory.reward, trajectory.stop_reason) == (1.0, "done")
    shown = [t.text for t in trajectory.turns if t.role == "observation"]
    assert shown == ["lower", "Give your guess as <guess>N</guess>."]
    assert [t.text for t in trajectory.turns if t.role == "assistant"] == turns[:3]
    replayed = _score(task, *turns[:3])
    assert replayed.reward == trajectory.reward


@pytest.mark.e2e
def test_a_tool_environment_shows_its_tools_and_answers_the_calls_a_turn_writes(env_with_classic, tmp_path):
    import json

    from veriloop.rollout import EpisodeConfig, ReplayEngine, StopConfig, rollout

    [task] = IMPORTERS.get("verifiers").run({"taskset": "classic_tools", "environment": env_with_classic.name})
    assert task.verifier["multi_turn"] is True
    system = task.messages()[0]["content"]
    assert "<tool_call>" in system and '"name": "multiply"' in system
    call = '<tool_call>{"name": "multiply", "arguments": {"a": 6, "b": 7}}</tool_call>'
    assert _score(task, call, "So \\boxed{42}").reward == 1.0
    assert _score(task, "\\boxed{42}").reward == pytest.approx(0.8)  # no call: the rollout ends at once
    bad = _score(task, '<tool_call>{"name": "divide", "arguments": {}}</tool_call>', "\\boxed{42}")
    assert bad.reward == 1.0  # the environment answered the unknown tool with its error, then the answer
    script = tmp_path / "script.jsonl"
    script.write_text(json.dumps({"prompt": task.messages()[-1]["content"], "turns": [call, "\\boxed{42}"]}) + "\n")
    [trajectory] = rollout([task], ReplayEngine(script), EpisodeConfig(stop=StopConfig(max_turns=4))).trajectories
    assert (trajectory.reward, trajectory.stop_reason) == (1.0, "done")
    assert [t.text for t in trajectory.turns if t.role == "observation"] == ["42"]
