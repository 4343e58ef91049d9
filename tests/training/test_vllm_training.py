"""RL with ``rollout.engine: vllm``: rollouts from an in-process vLLM beside the trainer.

The runs need vLLM (.venv-vllm, ``make setup-vllm``); the config checks and the LoRA merge run
everywhere.
"""

import importlib.util

import pytest
import torch

from veriloop.core import UserError

HAS_VLLM = importlib.util.find_spec("vllm") is not None
needs_vllm = pytest.mark.skipif(not HAS_VLLM, reason="needs vLLM: make setup-vllm, then run with .venv-vllm/bin/python")
pytestmark = pytest.mark.vllm


@pytest.mark.parametrize(
    "sections, named",
    [
        ({"pipeline": {"mode": "async"}}, "pipeline.mode=async"),
        ({"distributed": {"ray_ranks": 2}}, "distributed.ray_ranks"),
        ({"rollout": {"top_p": 0.9}}, "rollout.top_p < 1"),
    ],
)
def test_unsupported_combinations_are_refused_by_name(tmp_path, sections, named):
    from veriloop.training import load_config

    overrides = ["rollout.engine=vllm"] + [
        f"{section}.{field}={value}" for section, fields in sections.items() for field, value in fields.items()
    ]
    with pytest.raises(UserError, match="rollout.engine=vllm") as error:
        load_config(None, overrides)
    assert named in str(error.value)
    assert load_config(None, overrides[1:]).rollout.engine == "hf"  # the default, which supports them


def test_ray_rollout_actors_are_accepted_in_sync_mode():
    from veriloop.training import load_config

    config = load_config(None, ["rollout.engine=vllm", "pipeline.backend=ray", "pipeline.worker_gpus=1"])
    assert config.pipeline.backend == "ray" and config.pipeline.worker_gpus == 1
    with pytest.raises(UserError, match="pipeline.mode=async"):
        load_config(None, ["rollout.engine=vllm", "pipeline.backend=ray", "pipeline.mode=async"])


def test_the_command_line_refuses_them_with_exit_2(config_file, run_cli):
    result = run_cli("train", str(config_file(rollout={"engine": "vllm"}, pipeline={"mode": "async"})))
    assert result.returncode == 2 and "pipeline.mode=async" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.skipif(HAS_VLLM, reason="vLLM is installed here")
def test_without_vllm_a_run_says_how_to_get_it(config_file, run_cli, tmp_path):
    result = run_cli("train", str(config_file(rollout={"engine": "vllm"}, run={"out": str(tmp_path / "r")})))
    assert result.returncode == 2 and "make setup-vllm" in result.stderr
    assert "Traceback" not in result.stderr


def test_lora_weights_are_pushed_merged_under_hf_names(tiny_model_dir):
    from veriloop.training._config import ModelSection
    from veriloop.training._model import load_policy
    from veriloop.training._rollout_worker import hf_weights

    model, _ = load_policy(ModelSection(path=str(tiny_model_dir), lora_rank=4))
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "lora_B" in name:
                parameter.normal_()  # adapters that change the layers
    plain = model.get_base_model().__class__.from_pretrained(tiny_model_dir).state_dict()
    full = hf_weights(model)
    pushed = hf_weights(model, trainable_only=True)  # the adapted layers, each whole (weight and bias)
    assert set(full) == set(plain)
    merged = model.merge_and_unload().state_dict()
    for name, tensor in full.items():
        assert torch.allclose(tensor, merged[name], atol=1e-6), name
    changed = {name for name in full if not torch.equal(full[name], plain[name])}
    assert changed and all(name.endswith("proj.weight") for name in changed)
    assert set(pushed) == changed | {name for name in plain if name.endswith("proj.bias")}


def test_full_training_pushes_the_trainable_weights(tiny_model_dir):
    from veriloop.training._config import ModelSection
    from veriloop.training._model import load_policy
    from veriloop.training._rollout_worker import hf_weights

    model, _ = load_policy(ModelSection(path=str(tiny_model_dir)))
    pushed = hf_weights(model, trainable_only=True)
    assert set(pushed) == {name for name, p in model.named_parameters()}
    assert all(pushed[name].data_ptr() == p.data_ptr() for name, p in model.named_parameters())  # no copies


@needs_vllm
def test_rl_with_vllm_rollouts_raises_the_reward(make_config, digit_tasks):
    """20 steps on the digit tasks (a random tiny model answers some; see conftest.py), sampled by
    vLLM. The quickstart's arithmetic needs an SFT base first, which takes minutes on 2 cores."""
    from veriloop.rollout import TrajectoryStore
    from veriloop.training import RLTrainer

    config = make_config(
        "vllm-rl",
        rollout={"engine": "vllm", "vllm_kv_cache_mb": 64, "vllm_max_model_len": 128},
        algorithm={"recompute_logprobs": True},
        run={"steps": 20},
    )
    trainer = RLTrainer(config, tasks=digit_tasks)
    before = {name: t.detach().clone() for name, t in trainer.model.state_dict().items()}
    history = trainer.train()
    assert any(not torch.equal(before[n], t) for n, t in trainer.model.state_dict().items())
    trained = [m for m in history if "reward/mean" in m]
    assert len(trained) >= 15
    # vLLM samples with the trainer's weights after every push: its log-probs are the trainer's.
    mismatch = [m["logprob_mismatch/mean_abs"] for m in trained]
    assert max(mismatch) < 1e-4, mismatch
    rewards = [m["reward/sampled_mean"] for m in history]
    first, last = sum(rewards[:5]) / 5, sum(rewards[-5:]) / 5
    assert last > first + 0.15, (first, last, rewards)
    stored = list(TrajectoryStore(trainer.out / "trajectories"))
    assert {t.policy_version for t in stored} == {m["policy_version"] - 1 for m in trained}


@needs_vllm
def test_lora_training_with_vllm_samples_from_the_merged_policy(make_config, digit_tasks):
    from veriloop.training import RLTrainer

    config = make_config(
        "vllm-lora",
        model={"lora_rank": 4},
        rollout={"engine": "vllm", "vllm_kv_cache_mb": 32, "vllm_max_model_len": 128},
        algorithm={"recompute_logprobs": True},
        optim={"lr": 2e-2},
        run={"steps": 3},
    )
    trainer = RLTrainer(config, tasks=digit_tasks)
    history = trainer.train()
    trained = [m for m in history if "logprob_mismatch/mean_abs" in m]
    assert len(trained) >= 2
    assert all(m["logprob_mismatch/mean_abs"] < 1e-4 for m in trained)
    assert trainer.backend.policy_version == trainer.version == 3
