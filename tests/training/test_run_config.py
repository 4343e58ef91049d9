"""A resumed run keeps its config: changes are refused unless named; progress without a terminal; stop hints."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

VERILOOP = [sys.executable, "-m", "veriloop.cli._entry", "train"]


def _train(path, *overrides, timeout=600):
    return subprocess.run([*VERILOOP, str(path), *overrides], capture_output=True, text=True, timeout=timeout)


@pytest.mark.e2e
def test_resuming_with_another_config_is_refused_unless_the_field_is_named(tmp_path, config_file):
    path = config_file(
        rollout={"prompts_per_step": 2}, optim={"warmup_steps": 1}, run={"steps": 1, "checkpoint_every": 1}
    )
    out = f"run.out={tmp_path / 'run'}"
    first = _train(path, out)
    assert first.returncode == 0, first.stderr
    assert "step 1/1" in first.stderr  # a plain progress line: no terminal here
    assert (tmp_path / "run" / "train_config.json").is_file()

    changed = _train(path, out, "run.steps=2", "optim.lr=0.001")
    assert changed.returncode == 2 and "optim.lr: 0.002 -> 0.001" in changed.stderr, changed.stderr
    assert "run.steps" not in changed.stderr  # running longer is no change of the experiment

    allowed = _train(path, out, "run.steps=2", "optim.lr=0.001", "run.resume_changes=[optim.lr]")
    assert allowed.returncode == 0, allowed.stderr
    assert "resumed from step 1" in allowed.stderr


@pytest.mark.e2e
def test_sigterm_ends_with_how_to_resume(tmp_path, config_file):
    path = config_file(rollout={"prompts_per_step": 2}, run={"steps": 1000, "checkpoint_every": 1})
    out = tmp_path / "run"
    process = subprocess.Popen([*VERILOOP, str(path), f"run.out={out}"], stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    while not (out / "checkpoints" / "step-00000001").exists() and time.time() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 130, stderr
    assert "resume from its last checkpoint with: veriloop train " + str(path) in stderr


def test_group_relative_estimators_need_two_samples_per_group(tiny_model_dir):
    import pytest

    from veriloop.core import UserError
    from veriloop.training import load_config

    for estimator in ("grpo", "dr_grpo", "rloo"):
        with pytest.raises(UserError, match="needs rollout.group_size >= 2"):
            load_config(
                None, [f"model.path={tiny_model_dir}", "rollout.group_size=1", f"algorithm.advantage={estimator}"]
            )
    load_config(None, [f"model.path={tiny_model_dir}", "rollout.group_size=1", "algorithm.advantage=reinforce_pp"])


def test_a_run_saved_before_newer_settings_existed_still_resumes(tiny_model_dir, tmp_path):
    """Settings added later are read at their defaults, not as changes; a changed one still differs."""
    import json

    import pytest

    from veriloop.core import UserError
    from veriloop.training import load_config
    from veriloop.training._run_config import CONFIG_FILE, check_and_save_run_config

    config = load_config(None, [f"model.path={tiny_model_dir}"])
    check_and_save_run_config(tmp_path, config, resuming=False)
    saved = json.loads((tmp_path / CONFIG_FILE).read_text())
    for section, field in (
        ("rollout", "reuse_kv"),
        ("rollout", "tool_instructions"),
        ("optim", "activation_checkpointing"),
    ):
        saved[section].pop(field)
    (tmp_path / CONFIG_FILE).write_text(json.dumps(saved))
    check_and_save_run_config(tmp_path, config, resuming=True)
    saved["optim"]["lr"] = saved["optim"]["lr"] * 2
    (tmp_path / CONFIG_FILE).write_text(json.dumps(saved))
    with pytest.raises(UserError, match="optim.lr"):
        check_and_save_run_config(tmp_path, config, resuming=True)
