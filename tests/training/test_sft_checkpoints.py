"""SFT checkpoints: a run stopped after its checkpoint and rerun with more steps trains the
straight run's steps (same batches, same AdamW state, same weights)."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from veriloop.core import UserError
from veriloop.training import SFTConfig, run_sft
from veriloop.training._checkpoint import list_checkpoints, load_trainer_state


@pytest.fixture
def sft_config(tmp_path, tiny_model_dir):
    """8 conversations in batches of 3: the data order crosses a shuffle every few steps."""
    data = tmp_path / "sft.jsonl"
    rows = [
        {"messages": [{"role": "user", "content": f"{i}?"}, {"role": "assistant", "content": str(i) * (1 + i % 3)}]}
        for i in range(8)
    ]
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))

    def make(out: str, steps: int, checkpoint_every: int = 2) -> SFTConfig:
        return SFTConfig.model_validate(
            {
                "model": {"path": str(tiny_model_dir)},
                "data": {"train": str(data)},
                "optim": {"batch_size": 3, "lr": 2e-3, "warmup_steps": 1, "steps": steps},
                "run": {"out": str(tmp_path / out), "checkpoint_every": checkpoint_every, "progress": False},
            }
        )

    return make


def test_a_rerun_resumes_sft_from_its_last_checkpoint_to_the_straight_runs_weights(tmp_path, sft_config):
    straight = run_sft(sft_config("straight", steps=5))
    assert [c.name for c in list_checkpoints(tmp_path / "straight" / "checkpoints")] == [
        "step-00000004",
        "step-00000005",  # every 2 steps and after the last; keep_checkpoints=2
    ]
    assert run_sft(sft_config("resumed", steps=3))[-1].step == 2  # checkpoints after steps 2 and 3
    resumed = run_sft(sft_config("resumed", steps=5))
    assert [r.step for r in resumed] == [3, 4]
    assert [r.tokens for r in resumed] == [r.tokens for r in straight[3:]]  # the same batches
    assert [r.loss for r in resumed] == pytest.approx([r.loss for r in straight[3:]], rel=1e-6)
    expected = load_file(tmp_path / "straight" / "model.safetensors")
    final = load_file(tmp_path / "resumed" / "model.safetensors")
    for name, tensor in expected.items():
        assert (final[name] - tensor).norm() <= 1e-6 * tensor.norm(), name
    moments = load_trainer_state(list_checkpoints(tmp_path / "resumed" / "checkpoints")[-1])["optimizer"]["state"]
    straight_moments = load_trainer_state(list_checkpoints(tmp_path / "straight" / "checkpoints")[-1])["optimizer"]
    for index, state in moments.items():
        assert float(state["step"]) == 5
        other = straight_moments["state"][index]["exp_avg_sq"]
        assert torch.allclose(state["exp_avg_sq"], other, rtol=1e-5, atol=1e-12), index


def test_without_checkpoint_every_sft_writes_no_checkpoints(tmp_path, sft_config):
    run_sft(sft_config("plain", steps=2, checkpoint_every=0))
    assert (tmp_path / "plain" / "model.safetensors").is_file()
    assert not (tmp_path / "plain" / "checkpoints").exists()


def test_sft_refuses_to_resume_from_an_rl_checkpoint(tmp_path, sft_config):
    run_sft(sft_config("run", steps=2))
    checkpoint = list_checkpoints(tmp_path / "run" / "checkpoints")[-1]
    state = load_trainer_state(checkpoint)
    state["sampler"] = {"epoch": 0, "position": 0, "drawn": 0}  # the RL sampler's cursor
    torch.save(state, checkpoint / "trainer_state.pt")
    with pytest.raises(UserError, match="not a checkpoint of an SFT run"):
        run_sft(sft_config("run", steps=4))
