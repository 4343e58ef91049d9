"""run_eval on the tiny model: rows, summary, registry, failures as data, settings checks."""

from __future__ import annotations

import json

import pytest

from veriloop.core import UserError, write_jsonl
from veriloop.evaluation import RunRegistry, eval_episode_config, failed_tasks, load_run, read_samples, run_eval
from veriloop.tasks import generate_tasks, load_tasks


@pytest.fixture(scope="module")
def task_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("tasks") / "eval.jsonl"
    write_jsonl(path, generate_tasks("arithmetic", seed=11, size=5) + generate_tasks("numeric-tables", seed=11, size=2))
    return path


@pytest.fixture(scope="module")
def finished(tiny_engine, task_file, tmp_path_factory):
    root = tmp_path_factory.mktemp("evals")
    summary = run_eval(
        tiny_engine,
        task_file,
        samples=3,
        out=root / "base",
        max_tokens=8,
        seed=5,
        chunk_size=3,
        export_failures=root / "failures.jsonl",
    )
    return root, summary


def test_summary_has_every_figure(finished, task_file):
    root, summary = finished
    assert isinstance(summary["pass@1"], float) and 0.0 <= summary["pass@1"] <= 1.0
    low, high = summary["pass@1_ci"]
    assert 0.0 <= low <= summary["pass@1"] <= high <= 1.0
    assert set(summary["pass@k"]) == {"1", "2", "3"}
    assert summary["pass@k"]["1"] <= summary["pass@k"]["2"] <= summary["pass@k"]["3"]
    assert set(summary["domains"]) == {"arithmetic", "numeric_tables"}
    assert summary["domains"]["numeric_tables"]["tasks"] == 2 and summary["domains"]["arithmetic"]["samples"] == 15
    assert summary["tasks"] == 7 and summary["samples"] == 21 and summary["infra_errors"] == 0
    assert summary["tokens"]["completion"] > 0 and summary["time"]["wall_s"] > 0
    assert summary["model"] == "hf" and summary["seed"] == 5 and len(summary["task_set_hash"]) == 16
    assert summary["task_files"] == [str(task_file)] and summary["max_tokens"] == 8
    on_disk = json.loads((root / "base" / "summary.json").read_text())
    assert on_disk == summary
    assert not (root / "base" / "parts").exists()


def test_rows_are_one_per_sample_in_task_order(finished, task_file):
    root, _ = finished
    run = load_run(root / "base")
    tasks = load_tasks(task_file)
    assert [(s.task_id, s.sample_index) for s in run.samples] == [(t.id, j) for t in tasks for j in range(3)]
    first = run.samples[0]
    assert first.prompt == tasks[0].prompt and first.status == "scored" and first.detail
    assert 0 < first.completion_tokens <= 8


def test_run_is_recorded_in_the_registry_beside_the_output(finished, tiny_engine, task_file):
    root, summary = finished
    registry = RunRegistry(root / "evals.sqlite")
    second = run_eval(
        tiny_engine, task_file, samples=1, out=root / "second", max_tokens=4, seed=5, model_label="tiny@step-1"
    )
    runs = registry.runs(task_set_hash=summary["task_set_hash"])
    assert [r.label for r in runs] == ["base", "second"] and [r.model for r in runs] == ["hf", "tiny@step-1"]
    assert registry.runs(model="tiny@step-1") == runs[1:]
    assert runs[0].run_id == summary["run_id"] and runs[1].pass_at_1 == second["pass@1"]
    assert runs[1].summary["samples_per_task"] == 1


def test_finished_run_is_not_sampled_again(finished, tiny_engine, task_file):
    root, summary = finished
    again = run_eval(
        tiny_engine, task_file, samples=3, out=root / "base", max_tokens=8, seed=5, chunk_size=3, record=False
    )
    assert again["created_at"] == summary["created_at"] and again["pass@1"] == summary["pass@1"]


def test_other_settings_in_the_same_directory_are_refused(finished, tiny_engine, task_file):
    root, _ = finished
    with pytest.raises(UserError, match=r"other settings \(seed differ\)"):
        run_eval(tiny_engine, task_file, samples=3, out=root / "base", max_tokens=8, seed=6, chunk_size=3)


def test_a_run_started_before_newer_episode_settings_existed_still_resumes(finished, tiny_engine, task_file):
    """Settings added to the episode config later are read at their defaults, not as changes."""
    root, summary = finished
    settings_file = root / "base" / "eval.json"
    original = settings_file.read_text()
    stored = json.loads(original)
    for newer in ("context_budget", "context_policy", "reuse_kv", "tool_instructions"):
        stored["episode"].pop(newer)
    settings_file.write_text(json.dumps(stored))
    again = run_eval(
        tiny_engine, task_file, samples=3, out=root / "base", max_tokens=8, seed=5, chunk_size=3, record=False
    )
    assert again["created_at"] == summary["created_at"]
    stored["episode"]["temperature"] = 0.5
    settings_file.write_text(json.dumps(stored))
    with pytest.raises(UserError, match=r"other settings \(episode differ\)"):
        run_eval(tiny_engine, task_file, samples=3, out=root / "base", max_tokens=8, seed=5, chunk_size=3)
    settings_file.write_text(original)


def test_exported_failures_are_a_task_set_with_feedback(finished):
    root, summary = finished
    exported = load_tasks(root / "failures.jsonl")
    assert len(exported) == summary["exported_failures"]["tasks"] > 0
    record = exported[0].metadata["eval_failure"]
    assert record["model"] == "hf" and record["samples"] == 3 and record["feedback"] and record["pass_rate"] < 1


def test_failed_tasks_skip_solved_and_grader_broken_tasks(planted):
    from veriloop.core import Task

    tasks = [
        Task(id=i, domain="d", prompt="q", verifier={"kind": "exact"}, gold="42") for i in ("solved", "mixed", "broken")
    ]
    rows = planted({"solved": ("d", [True, True]), "mixed": ("d", [True, False])})
    rows += [
        row.model_copy(update={"task_id": "broken", "status": "infra_error", "reward": None, "passed": False})
        for row in planted({"broken": ("d", [False])})
    ]
    exported = failed_tasks(tasks, rows, model="m")
    assert [t.id for t in exported] == ["mixed"]
    assert exported[0].metadata["eval_failure"]["pass_rate"] == 0.5
    assert exported[0].metadata["eval_failure"]["feedback"] == "Expected 42 for mixed, got 41."


def test_overlap_with_a_training_set_is_reported(tiny_engine, tmp_path):
    tasks = generate_tasks("arithmetic", seed=3, size=4)
    warnings = []
    summary = run_eval(
        tiny_engine,
        tasks,
        samples=1,
        out=tmp_path / "run",
        max_tokens=2,
        record=False,
        train_tasks=tasks[:2],
        on_warning=warnings.append,
    )
    assert summary["overlap"]["overlapping"] == 2 and summary["overlap"]["fraction"] == 0.5
    assert warnings and warnings[0].startswith("2 of 4 eval tasks (50.0%) overlap")


def test_bad_inputs_are_user_errors(tiny_engine, task_file, tmp_path):
    with pytest.raises(UserError, match="samples must be at least 1"):
        run_eval(tiny_engine, task_file, samples=0, out=tmp_path / "x")
    with pytest.raises(UserError, match="appears twice"):
        run_eval(tiny_engine, [task_file, task_file], out=tmp_path / "x")
    with pytest.raises(UserError, match="not a model directory"):
        run_eval(tmp_path / "missing-model", task_file, out=tmp_path / "x")
    with pytest.raises(UserError, match="max_tokens_per_turn"):
        run_eval(tiny_engine, task_file, out=tmp_path / "x", max_tokens=0)


@pytest.mark.e2e
def test_cli_reports_bad_rows_and_missing_models(tmp_path, task_file, run_cli):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "domain": "d", "prompt": "q", "verifier": {"kind": "exact"}}\n{"id": "b"}\nnot json\n')
    result = run_cli("eval", "--model", str(tmp_path), "--tasks", str(bad), "--out", str(tmp_path / "o"))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith(f"{bad}: line 2: missing field") and lines[1].startswith(
        f"{bad}: line 3: malformed JSON"
    )
    result = run_cli("eval", "--model", str(tmp_path / "none"), "--tasks", str(task_file), "--out", str(tmp_path / "o"))
    assert result.returncode == 2 and result.stderr.startswith("error: ") and "not a model directory" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.e2e
def test_prompts_that_do_not_fit_the_context_are_skipped_or_refused(tiny_engine, tmp_path, run_cli, tiny_model_dir):
    from veriloop.core import Task

    fine = generate_tasks("arithmetic", seed=3, size=2)
    huge = Task(id="huge", domain="math", prompt="7 " * 1200 + "What is 1 + 1?", verifier={"kind": "exact"}, gold="2")
    path = tmp_path / "tasks.jsonl"
    write_jsonl(path, [*fine, huge])
    warnings: list[str] = []
    summary = run_eval(tiny_engine, path, out=tmp_path / "skip", max_tokens=8, record=False, on_warning=warnings.append)
    assert summary["tasks"] == 2 and [s["task_id"] for s in summary["skipped_too_long"]] == ["huge"]
    assert summary["skipped_too_long"][0]["context"] == 1024 and summary["skipped_too_long"][0]["prompt_tokens"] > 1024
    assert any("1 tasks skipped" in w for w in warnings)
    with pytest.raises(UserError, match="huge"):
        run_eval(tiny_engine, path, out=tmp_path / "error", max_tokens=8, record=False, too_long="error")
    refused = run_cli(
        "eval",
        "--model",
        str(tiny_model_dir),
        "--tasks",
        str(path),
        "--out",
        str(tmp_path / "cli"),
        "--max-tokens",
        "8",
        "--too-long",
        "error",
    )
    assert refused.returncode == 2 and "context of 1024" in refused.stderr


@pytest.mark.e2e
def test_each_task_gets_its_domains_budget_and_the_context_check_uses_it(
    tiny_engine, tmp_path, run_cli, tiny_model_dir
):
    """The same prompt fits with the default 8 new tokens and not with its domain's budget: only the
    task of that domain is skipped; the others' samples stop at 8 tokens, a long domain's go on."""
    from veriloop.core import Task
    from veriloop.rollout import prompt_tokens

    prompt = "7 " * 300 + "What is 1 + 1?"
    tasks = [Task(id=f"{d}/0", domain=d, prompt=prompt, verifier={"kind": "exact"}, gold="2") for d in ("math", "cad")]
    tasks += [
        Task(id=f"long/{i}", domain="long", prompt=f"Say {i}.", verifier={"kind": "exact"}, gold="2") for i in range(4)
    ]
    episode = eval_episode_config(1.0, 8, max_tokens_by_domain={"cad": 600, "long": 40})
    assert (
        prompt_tokens(tasks[1], tiny_engine, episode) + 600 > 1024 >= prompt_tokens(tasks[0], tiny_engine, episode) + 8
    )
    path = tmp_path / "tasks.jsonl"
    write_jsonl(path, tasks)
    summary = run_eval(tiny_engine, path, out=tmp_path / "run", samples=2, episode=episode, record=False)
    assert [(s["task_id"], s["max_tokens"]) for s in summary["skipped_too_long"]] == [("cad/0", 600)]
    assert summary["max_tokens_by_domain"] == {"cad": 600, "long": 40}
    samples = read_samples(tmp_path / "run" / "samples.parquet")
    assert all(s.completion_tokens <= 8 for s in samples if s.task_id == "math/0")
    assert max(s.completion_tokens for s in samples if s.task_id.startswith("long/")) > 8
    base = ["eval", "--model", str(tiny_model_dir), "--tasks", str(path), "--out", str(tmp_path / "cli")]
    for option, message in (("cad=0", "domain 'cad': 0 is not a token budget"), ("cad", "expected DOMAIN=TOKENS")):
        refused = run_cli(*base, "--domain-max-tokens", option)
        assert refused.returncode == 2 and message in refused.stderr and "Traceback" not in refused.stderr
