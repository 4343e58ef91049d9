"""Overlap between a training set and an eval set, by prompts and by gold answers."""

from __future__ import annotations

import json

import pytest

from veriloop.core import Task, write_jsonl
from veriloop.evaluation import overlap
from veriloop.tasks import generate_tasks

SOLUTION = "def add(a, b):\n    total = a + b\n    return total if total is not None else 0\n"


def _task(task_id: str, prompt: str, gold: str = "7") -> Task:
    return Task(id=task_id, domain="d", prompt=prompt, verifier={"kind": "exact"}, gold=gold)


def test_prompts_and_golds_are_compared_separately():
    train = [
        _task("t1", "Write a function add that returns the sum of its two arguments", SOLUTION),
        _task("t2", "What is the capital of France?", "Paris"),
    ]
    evals = [
        _task("e1", "Please write a function add that returns the sum of its two arguments, fast", "x"),
        _task("e2", "Implement addition of two numbers", SOLUTION),
        _task("e3", "Name the capital city of Italy", "Paris"),  # a short gold never counts
        _task("e4", "what is the capital of france"),
    ]
    report = overlap(train, evals, ngram=6)
    assert [(o.heldout_id, o.train_id) for o in report.prompt_overlaps] == [("e1", "t1"), ("e4", "t2")]
    assert [(o.heldout_id, o.train_id) for o in report.gold_overlaps] == [("e2", "t1")]
    assert report.overlapping_ids == ("e1", "e4", "e2") and report.fraction == 0.75 and not report.clean
    assert 0 < report.prompt_ngram_fraction < 1 and report.gold_ngram_fraction > 0
    assert report.warning().startswith("3 of 4 eval tasks (75.0%) overlap the 2 training tasks (2 by prompt, 1 by gold")


def test_generated_splits_with_other_seeds_are_clean():
    report = overlap(
        generate_tasks("arithmetic", seed=1, size=100, difficulty=5),
        generate_tasks("arithmetic", seed=2, size=100, difficulty=5),
    )
    assert report.clean and report.warning() is None and report.to_dict()["overlapping"] == 0


def test_ngram_must_be_positive():
    with pytest.raises(ValueError, match="ngram"):
        overlap([], [], ngram=0)


@pytest.mark.e2e
def test_cli_tasks_overlap(tmp_path, run_cli):
    train, same, other = tmp_path / "train.jsonl", tmp_path / "same.jsonl", tmp_path / "other.jsonl"
    write_jsonl(train, generate_tasks("arithmetic", seed=1, size=30, difficulty=5))
    write_jsonl(same, generate_tasks("arithmetic", seed=1, size=10, difficulty=5))
    write_jsonl(other, generate_tasks("arithmetic", seed=2, size=10, difficulty=5))

    dirty = run_cli("tasks", "overlap", str(train), str(same))
    assert dirty.returncode == 1 and "10 of 10 eval tasks (100.0%) overlap the 30 training tasks" in dirty.stdout
    clean = run_cli("tasks", "overlap", str(train), str(other), "--json")
    assert clean.returncode == 0 and json.loads(clean.stdout)["overlapping"] == 0
    missing = run_cli("tasks", "overlap", str(train), str(tmp_path / "none.jsonl"))
    assert missing.returncode == 2 and missing.stderr.strip() == f"error: {tmp_path / 'none.jsonl'}: no such file"
