"""A verifier kind and an estimator registered by a plugin file outside the package, used by ``veriloop train``."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from veriloop.rollout import TrajectoryStore
from veriloop.training import read_metrics

pytestmark = pytest.mark.e2e


def test_veriloop_train_uses_a_plugin_kind_and_estimator(plugin_config, tmp_path):
    out = tmp_path / "run"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    environment = {k: v for k, v in os.environ.items() if k != "VERILOOP_PLUGINS"}
    done = subprocess.run(
        [sys.executable, "-m", "veriloop.cli._entry", "train", str(plugin_config), f"run.out={out}"],
        capture_output=True,
        text=True,
        cwd=elsewhere,
        env=environment,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    scores = [t.score for t in TrajectoryStore(out / "trajectories")]
    assert [r["step"] for r in read_metrics(out)] == [1, 2]
    assert len(scores) >= 2 * 4
    assert all(s.status == "scored" and s.detail.startswith("has_digit_plugin") for s in scores)


def test_without_its_plugin_the_config_names_an_unknown_estimator(plugin_config, tmp_path):
    text = plugin_config.read_text().replace("- my_kinds.py", "[]").replace("plugins:\n", "plugins: ")
    bare = plugin_config.with_name("bare.yaml")
    bare.write_text(text)
    done = subprocess.run(
        [sys.executable, "-m", "veriloop.cli._entry", "train", str(bare), f"run.out={tmp_path / 'x'}"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 2 and "unknown advantage estimator 'centred_plugin'" in done.stderr


def test_tasks_validate_takes_a_plugin(plugin_config, run_cli):
    tasks = plugin_config.with_name("tasks.jsonl")
    without = run_cli("tasks", "validate", str(tasks))
    assert without.returncode == 2 and "has_digit_plugin" in without.stderr + without.stdout
    done = run_cli("tasks", "validate", str(tasks), "--plugin", str(plugin_config.with_name("my_kinds.py")))
    assert done.returncode == 0, done.stdout + done.stderr
