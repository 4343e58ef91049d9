"""RL with ``rollout.engine: vllm``: rollouts from an in-process vLLM beside the trainer.

The runs need vLLM (.venv-vllm, ``make setup-vllm``); the config checks and the LoRA merge run
everywhere.
"""

import importlib.util
import json

import pytest
import torch

from veriloop.core import UserError
from veriloop.training import RLTrainer

HAS_VLLM = importlib.util.find_spec("vllm") is not None
needs_vllm = pytest.mark.skipif(not HAS_VLLM, reason="needs vLLM: make setup-vllm, then run with .venv-vllm/bin/python")
pytestmark = [pytest.mark.scale, pytest.mark.vllm]


@pytest.mark.parametrize("sections, named", [({"distributed": {"ray_ranks": 2}}, "distributed.ray_ranks")])
def test_unsupported_combinations_are_refused_by_name(tmp_path, sections, named):
    from veriloop.training import load_config

    overrides = ["rollout.engine=vllm"] + [
        f"{section}.{field}={value}" for section, fields in sections.items() for field, value in fields.items()
    ]
    with pytest.raises(UserError, match="rollout.engine=vllm") as error:
        load_config(None, overrides)
    assert named in str(error.value)
    assert load_config(None, overrides[1:]).rollout.engine == "hf"  # the default, which supports them


@pytest.mark.parametrize("backend", ["local", "ray"])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_rollouts_in_this_process_or_on_ray_actors_sync_or_async_are_accepted(backend, mode):
    from veriloop.training import load_config

    overrides = [f"pipeline.backend={backend}", f"pipeline.mode={mode}", "pipeline.worker_gpus=1"]
    config = load_config(None, ["rollout.engine=vllm", *overrides])
    assert (config.rollout.engine, config.pipeline.backend, config.pipeline.mode) == ("vllm", backend, mode)


def test_truncated_sampling_is_accepted():
    """vLLM reports processed log-probs: those of the top-k/top-p distribution it sampled from."""
    from veriloop.training import load_config

    config = load_config(None, ["rollout.engine=vllm", "rollout.top_p=0.9", "rollout.top_k=20"])
    assert (config.rollout.top_p, config.rollout.top_k) == (0.9, 20)


def test_the_command_line_refuses_them_with_exit_2(config_file, run_cli):
    result = run_cli("train", str(config_file(rollout={"engine": "vllm"}, distributed={"ray_ranks": 2})))
    assert result.returncode == 2 and "distributed.ray_ranks" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.skipif(HAS_VLLM, reason="vLLM is installed here")
def test_without_vllm_a_run_says_how_to_get_it(config_file, run_cli, tmp_path):
    result = run_cli("train", str(config_file(rollout={"engine": "vllm"}, run={"out": str(tmp_path / "r")})))
    assert result.returncode == 2 and "make setup-vllm" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.skipif(HAS_VLLM, reason="vLLM is installed here")
@pytest.mark.parametrize("recipe", ["arithmetic", "seed-loop"])
def test_without_vllm_a_quickstart_stops_before_its_first_stage(tmp_path, run_cli, recipe):
    out = tmp_path / "qs"
    result = run_cli("quickstart", "--recipe", recipe, "engine=vllm", f"out={out}")
    assert result.returncode == 2 and "make setup-vllm" in result.stderr
    assert "Traceback" not in result.stderr and not out.exists()  # no model built, no SFT run


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
    mismatch = [m["mismatch/abs_logprob_diff_mean"] for m in trained]
    assert max(mismatch) < 1e-4, mismatch
    rewards = [m["reward/sampled_mean"] for m in history]
    first, last = sum(rewards[:5]) / 5, sum(rewards[-5:]) / 5
    assert last > first + 0.15, (first, last, rewards)
    stored = list(TrajectoryStore(trainer.out / "trajectories"))
    assert {t.policy_version for t in stored} == {m["policy_version"] - 1 for m in trained}


@needs_vllm
def test_lora_training_with_vllm_samples_from_the_merged_policy(make_config, digit_tasks):
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
    trained = [m for m in history if "mismatch/abs_logprob_diff_mean" in m]
    assert len(trained) >= 2
    assert all(m["mismatch/abs_logprob_diff_mean"] < 1e-4 for m in trained)
    assert trainer.backend.policy_version == trainer.version == 3


def _vllm_run(make_config, tasks, name, steps, **pipeline):
    config = make_config(
        name,
        rollout={"engine": "vllm", "vllm_kv_cache_mb": 64, "vllm_max_model_len": 128},
        pipeline=pipeline,
        run={"steps": steps},
    )
    trainer = RLTrainer(config, tasks=tasks)
    return trainer, trainer.train()


@needs_vllm
def test_async_vllm_at_staleness_0_is_the_synchronous_run(make_config, digit_tasks):
    """vLLM samples on the producer thread while the trainer trains; at staleness 0 that is the
    synchronous algorithm, so the samples, the losses and the weights are the same."""
    from veriloop.rollout import TrajectoryStore

    sync, sync_history = _vllm_run(make_config, digit_tasks, "vllm-sync", 4)
    same, async_history = _vllm_run(make_config, digit_tasks, "vllm-async0", 4, mode="async", max_staleness=0)
    for a, b in zip(sync_history, async_history, strict=True):
        assert a["reward/sampled_mean"] == b["reward/sampled_mean"]
        assert a["policy_loss"] == b["policy_loss"] and b["staleness/max"] == 0
    assert all(torch.equal(t, same.model.state_dict()[k]) for k, t in sync.model.state_dict().items())
    first = [t.completion_ids for t in TrajectoryStore(sync.out / "trajectories")]
    assert first == [t.completion_ids for t in TrajectoryStore(same.out / "trajectories")]


@needs_vllm
def test_async_vllm_runs_ahead_within_its_staleness_bound(make_config, digit_tasks):
    from veriloop.rollout import TrajectoryStore

    trainer, history = _vllm_run(make_config, digit_tasks, "vllm-async1", 6, mode="async", max_staleness=1)
    assert [m["policy_version"] for m in history] == list(range(1, 7))
    assert all(m["staleness/max"] <= 1 for m in history) and any(m["staleness/max"] == 1 for m in history)
    stored = list(TrajectoryStore(trainer.out / "trajectories"))
    per_step = len(stored) // 6
    for index, trajectory in enumerate(stored):
        step = index // per_step + 1
        assert step - 2 <= trajectory.policy_version <= step - 1
    assert len({t.policy_version for t in stored}) >= 4  # the producer loaded the updates as they came


@needs_vllm
def test_the_quickstart_with_vllm_rollouts_raises_the_reward(tmp_path, run_cli):
    """The quickstart's task end to end with ``engine=vllm``: its SFT base (the default 1,000
    steps; a shorter cold start leaves GRPO little to sharpen in 20 steps), then 20 GRPO steps
    of 64 prompts x 8 samples, each sampled by vLLM with the weights of the step before.

    A step's reward moves by a few points with how hard its 64 prompts happen to be (two or three
    numbers), so the rise is that of the least-squares line through all 20 steps (measured here:
    +0.037 and +0.045 over the run with vLLM, +0.078 with the hf engine)."""
    from veriloop.training import read_metrics

    out = tmp_path / "qs"
    settings = ["rl_steps=20", "train_size=2000", "heldout_size=50", "eval_samples=2"]
    result = run_cli("quickstart", "engine=vllm", f"out={out}", *settings, timeout=1200)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads((out / "rl" / "train_config.json").read_text())["rollout"]["engine"] == "vllm"
    metrics = [m for m in read_metrics(out / "rl") if "reward/sampled_mean" in m]
    assert [m["policy_version"] for m in metrics] == list(range(1, 21))
    rewards = [m["reward/sampled_mean"] for m in metrics]
    assert _fitted_rise(rewards) > 0.02, rewards


def _fitted_rise(values: list[float]) -> float:
    """How much the least-squares line through ``values`` (one per step) rises from first to last."""
    steps = range(len(values))
    mean_step, mean_value = sum(steps) / len(values), sum(values) / len(values)
    covariance = sum((s - mean_step) * (v - mean_value) for s, v in zip(steps, values))
    slope = covariance / sum((s - mean_step) ** 2 for s in steps)
    return slope * (len(values) - 1)


@needs_vllm
def test_the_seed_loop_samples_its_tool_episodes_with_vllm(tmp_path, run_cli):
    """The seeds' three domains (code with a sandbox, math, tool calls), shrunk to two RL steps:
    multi-turn episodes of every domain come from vLLM."""
    from veriloop.training import read_metrics

    out = tmp_path / "sl"
    shrunk = ["train_size=6", "heldout_size=2", "sft_steps=2", "sft_batch_size=5", "rl_steps=2"]
    shrunk += ["prompts_per_step=5", "group_size=2", "max_tokens=16", "seesaw_every=5"]
    result = run_cli("quickstart", "--recipe", "seed-loop", "engine=vllm", f"out={out}", *shrunk, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads((out / "rl" / "train_config.json").read_text())["rollout"]["engine"] == "vllm"
    steps = [m for m in read_metrics(out / "rl") if "groups/sampled" in m]
    assert len(steps) == 2 and all(m["groups/sampled"] >= 5 for m in steps)
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["heldout_pass@1"]) >= {"code", "math", "tool"}
