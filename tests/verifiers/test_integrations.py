"""The TRL reward function and verl compute_score, called the way those trainers call them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from veriloop.core import Task, UserError, write_jsonl
from veriloop.integrations import (
    make_compute_score,
    trl_dataset_rows,
    trl_reward_function,
    verl_rows,
    write_verl_parquet,
)
from veriloop.tasks import generate_tasks, import_tasks


@pytest.fixture(scope="module")
def tasks():
    return generate_tasks("arithmetic", seed=4, size=6) + generate_tasks("numeric-tables", seed=4, size=2)


@pytest.mark.e2e
def test_trl_reward_function_scores_a_batch_by_task_id(tasks, tmp_path):
    path = tmp_path / "tasks.jsonl"
    write_jsonl(path, tasks)
    reward = trl_reward_function(path)
    rows = trl_dataset_rows(tasks)
    completions = [f"\\boxed{{{t.gold}}}" for t in tasks[:6]] + [
        [{"role": "assistant", "content": "\n".join(f"{k}: {v}" for k, v in tasks[6].gold.items())}],
        [{"role": "assistant", "content": "no idea"}],
    ]
    rewards = reward(
        prompts=[row["prompt"] for row in rows],
        completions=completions,
        completion_ids=[[1, 2]] * len(rows),
        task_id=[row["task_id"] for row in rows],
        trainer_state=None,
    )
    assert rewards == [1.0] * 7 + [0.0]
    assert reward.__name__ == "veriloop"
    assert [s.task_id for s in reward.last_scores] == [t.id for t in tasks]
    reward.close()


def test_trl_reward_function_reports_grader_failures_as_none(tasks):
    broken = tasks[0].model_copy(update={"gold": None})
    reward = trl_reward_function([broken])
    assert reward(prompts=["p"], completions=["\\boxed{1}"], task_id=[broken.id]) == [None]
    assert trl_reward_function([broken], infra_error_reward=0.0)(completions=["1"], task_id=[broken.id]) == [0.0]


def test_trl_reward_function_needs_the_task_id_column(tasks):
    reward = trl_reward_function(tasks)
    with pytest.raises(UserError, match="needs a 'task_id' column"):
        reward(prompts=["p"], completions=["1"], problem=["x"])
    with pytest.raises(UserError, match="not in the task set"):
        reward(prompts=["p"], completions=["1"], task_id=["nope"])


def test_verl_compute_score_three_ways(tasks):
    compute_score = make_compute_score(tasks, verifiers={"tables": {"kind": "numeric"}})
    by_id = compute_score("arithmetic", f"#### {tasks[0].gold}", "ignored", {"task_id": tasks[0].id})
    assert by_id == {"score": 1.0, "passed": True, "infra_error": False}
    assert compute_score("openai/gsm8k", "The answer is 12", "12")["score"] == 1.0
    assert compute_score("openai/gsm8k", "The answer is 13", "12")["score"] == 0.0
    assert compute_score("tables", "a: 1\nb: 3", {"a": 1, "b": 2})["score"] == 0.5
    spec = {"verifier": {"kind": "exact", "case_sensitive": False}, "gold": "Paris"}
    assert compute_score("facts", "paris", spec)["passed"]
    broken = compute_score("facts", "x", {"verifier": {"kind": "exact"}})
    assert broken == {"score": 0.0, "passed": False, "infra_error": True}


def test_verl_rows_round_trip_through_the_importer(tasks, tmp_path):
    path = tmp_path / "train.parquet"
    write_verl_parquet(path, tasks[:6])
    imported = import_tasks("verl-parquet", file=path)
    assert [t.gold for t in imported] == [t.gold for t in tasks[:6]]
    compute_score = make_compute_score(tasks)
    for row in verl_rows(tasks[:6]):
        answer = f"\\boxed{{{row['reward_model']['ground_truth']}}}"
        assert compute_score(row["data_source"], answer, row["reward_model"]["ground_truth"], row["extra_info"])[
            "passed"
        ]


def test_module_level_compute_score_reads_tasks_from_the_environment(tasks, tmp_path):
    path = tmp_path / "tasks.jsonl"
    write_jsonl(path, tasks)
    code = (
        "from veriloop.integrations import compute_score;"
        f"print(compute_score('x', '\\\\boxed{{{tasks[1].gold}}}', None, {{'task_id': {tasks[1].id!r}}})['score'])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={"VERILOOP_TASKS": str(path), "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1.0"


def test_verl_parquet_has_the_native_layout_verl_reads(tasks, tmp_path, run_cli):
    import pyarrow as pa
    import pyarrow.parquet as pq

    source = tmp_path / "tasks.jsonl"
    write_jsonl(source, tasks[:4])
    out = tmp_path / "verl.parquet"
    done = run_cli("tasks", "export-verl", str(source), "--out", str(out))
    assert done.returncode == 0, done.stderr
    schema = pq.read_schema(out)
    assert pa.types.is_list(schema.field("prompt").type) and pa.types.is_struct(schema.field("prompt").type.value_type)
    assert pa.types.is_struct(schema.field("reward_model").type) and pa.types.is_struct(schema.field("extra_info").type)
    row = pq.read_table(out).to_pylist()[0]
    assert row["prompt"][0]["role"] == "user" and row["extra_info"]["task_id"] == tasks[0].id
    datasets = pytest.importorskip("datasets")  # what verl's RLHFDataset loads parquet with
    loaded = datasets.load_dataset("parquet", data_files=str(out))["train"]
    assert loaded[0]["prompt"] == row["prompt"] and loaded[0]["reward_model"]["ground_truth"] == tasks[0].gold


def test_a_row_naming_a_task_that_is_not_loaded_is_an_infra_error(tasks):
    without_tasks = make_compute_score()
    code_row = {"task_id": "humaneval/0"}  # without the task set a code row must not fall back to math
    result = without_tasks("code", "def f(): pass", "return 1", code_row)
    assert result["infra_error"] and result["score"] == 0.0 and "not in the loaded task set" in result["detail"]


def test_the_task_file_can_come_as_a_reward_kwarg(tasks, tmp_path):
    from veriloop.integrations import compute_score

    path = tmp_path / "tasks.jsonl"
    write_jsonl(path, tasks)
    result = compute_score("x", f"\\boxed{{{tasks[2].gold}}}", None, {"task_id": tasks[2].id}, tasks=str(path))
    assert result == {"score": 1.0, "passed": True, "infra_error": False}


@pytest.mark.e2e
def test_trls_grpo_trainer_runs_with_the_reward_function(tiny_model_dir, tmp_path):
    """examples/trl_grpo.py, as the README shows it: TRL's own trainer, veriloop's verifiers."""
    pytest.importorskip("trl")
    from pathlib import Path

    tasks = tmp_path / "arith.jsonl"
    write_jsonl(tasks, generate_tasks("arithmetic", seed=0, size=16))
    example = Path(__file__).parents[2] / "examples" / "trl_grpo.py"
    command = [sys.executable, str(example), "--model", str(tiny_model_dir), "--tasks", str(tasks), "--steps", "1"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "trained 1 steps; last batch rewards: [" in done.stdout


VERL_PYTHON = Path(__file__).resolve().parents[2] / ".venv-verl" / "bin" / "python"


@pytest.fixture(scope="module")
def verl_python() -> Path:
    """The verl environment's Python (``make setup-verl``; ``make test`` builds it first): verl pins
    transformers below the release the main environment has, so it lives in its own venv."""
    if not VERL_PYTHON.exists():
        pytest.skip(f"verl's environment is not built ({VERL_PYTHON} missing): run `make setup-verl`")
    return VERL_PYTHON


def test_verls_own_reward_manager_and_sandbox_reward_score_veriloop_tasks(
    verl_python, tasks, tiny_model_dir, sandbox_service, tmp_path, run_cli
):
    """examples/verl_reward.py: verl's RLHFDataset reads the exported parquet, its trainer's loader
    finds the reward function by path with the task file as a reward kwarg, and its
    NaiveRewardManager scores a rollout batch; then verl's own SandboxFusion code reward runs
    against ``veriloop sandbox serve --token`` with the token carried in the URL."""
    code = Task(
        id="code/double",
        domain="code",
        prompt="Write f(x) that returns twice x.",
        verifier={"kind": "python_tests", "entry_point": "f", "tests": "assert f(2) == 4\nassert f(-3) == -6\n"},
        gold="def f(x):\n    return 2 * x\n",
    )
    task_set = [*tasks[:4], code]
    path = tmp_path / "tasks.jsonl"
    write_jsonl(path, task_set)
    parquet = tmp_path / "tasks.parquet"
    assert run_cli("tasks", "export-verl", str(path), "--out", str(parquet)).returncode == 0
    stranger = tmp_path / "stranger.parquet"  # a row whose task is not in the loaded task set
    write_verl_parquet(stranger, [code.model_copy(update={"id": "code/unknown"})])
    right = {task.id: f"The answer is \\boxed{{{task.gold}}}" for task in tasks[:2]}
    wrong = {task.id: "The answer is \\boxed{-1}" for task in tasks[2:4]}
    responses = {**right, **wrong, code.id: f"```python\n{code.gold}```", "code/unknown": "```python\npass\n```"}
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps({"task_id": k, "response": v}) + "\n" for k, v in responses.items()))
    example = Path(__file__).parents[2] / "examples" / "verl_reward.py"
    args = ["--tasks", str(path), "--data", str(parquet), str(stranger), "--tokenizer", str(tiny_model_dir)]
    done = subprocess.run(
        [str(verl_python), str(example), *args, "--answers", str(answers)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]  # verl prints too
    by_id = {row["task_id"]: row for row in rows}
    assert set(by_id) == {task.id for task in task_set} | {"code/unknown"}
    for task_id in [*right, code.id]:
        assert by_id[task_id]["reward"] == 1.0 and by_id[task_id]["passed"], by_id[task_id]
    for task_id in wrong:
        assert by_id[task_id]["reward"] == 0.0 and not by_id[task_id]["passed"] and not by_id[task_id]["infra_error"]
    assert by_id["code/unknown"]["infra_error"] and by_id["code/unknown"]["reward"] == 0.0

    url, token = sandbox_service
    tests = {"inputs": ["3\n", "5\n"], "outputs": ["6\n", "10\n"]}
    cases = [
        {"completion": "```python\nprint(int(input()) * 2)\n```", "tests": tests},
        {"completion": "```python\nprint(int(input()) + 2)\n```", "tests": tests},
    ]
    cases_path = tmp_path / "cases.json"
    cases_path.write_text(json.dumps(cases))
    endpoint = url.replace("://", f"://veriloop:{token}@") + "/run_code"
    driver = Path(__file__).with_name("verl_sandbox_reward.py")
    done = subprocess.run(
        [str(verl_python), str(driver), endpoint, str(cases_path)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1]) == [1.0, 0.0]
