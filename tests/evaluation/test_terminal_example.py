"""examples/terminal_coding: known-good sequences pass every task, bad and tampering ones none
(the tiny model's two training steps on it: tests/training/test_workspace_training.py)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from veriloop.evaluation import run_eval
from veriloop.evaluation._run import eval_episode_config

FOLDER = Path(__file__).resolve().parents[2] / "examples" / "terminal_coding"


def _make_policies():
    spec = importlib.util.spec_from_file_location("make_policies", FOLDER / "make_policies.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_scripts_are_the_ones_make_policies_writes():
    tasks = [json.loads(line) for line in (FOLDER / "tasks.jsonl").read_text().splitlines()]
    for name, rows in _make_policies().policies(tasks).items():
        assert (FOLDER / f"{name}.jsonl").read_text() == "".join(json.dumps(row) + "\n" for row in rows), name


@pytest.mark.e2e
@pytest.mark.parametrize(("policy", "expected"), [("good", 1.0), ("bad", 0.0), ("tamper", 0.0)])
def test_known_sequences_pass_and_bad_or_tampering_ones_do_not(policy, expected, env_with_pytest, tmp_path):
    episode = eval_episode_config(1.0, 64, ("python", "shell", "submit"), 4)
    summary = run_eval(
        f"replay:{FOLDER / f'{policy}.jsonl'}",
        FOLDER / "tasks.jsonl",
        out=tmp_path / "out",
        episode=episode,
        record=False,
    )
    assert summary["pass@1"] == expected, summary
    assert summary["scored_samples"] == 6 and summary["infra_errors"] == 0
