"""``rollout.engine: vllm`` with ``pipeline.backend: ray``: rollout actors that each run their own vLLM.

A private single-node Ray on loopback, one actor, checked against the colocated vLLM backend
(the same engine in this process). The runs need vLLM and ray (.venv-vllm, ``make setup-vllm``).
"""

from __future__ import annotations

import importlib.util
import math
import os
from collections.abc import Iterator
from typing import Any

import pytest
import torch

HAS_VLLM_AND_RAY = all(importlib.util.find_spec(name) is not None for name in ("vllm", "ray"))
pytestmark = [
    pytest.mark.scale,
    pytest.mark.vllm,
    pytest.mark.skipif(not HAS_VLLM_AND_RAY, reason="needs vLLM and ray: make setup-vllm, then .venv-vllm/bin/python"),
]

VLLM = {"engine": "vllm", "vllm_kv_cache_mb": 64, "vllm_max_model_len": 128}
ONE_ACTOR = {"backend": "ray", "workers": 1, "worker_cpus": 1}


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """A private Ray for the module (what ``connect`` starts without an address), stopped after."""
    import ray

    from veriloop.training._ray import connect

    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("RAY_ADDRESS", raising=False)
        owns = connect("")
        yield
    if owns:
        ray.shutdown()


@pytest.fixture(scope="module")
def backends(local_ray, tiny_model_dir, tmp_path_factory) -> Iterator[tuple[Any, Any, Any]]:
    """(policy, colocated vLLM backend, Ray vLLM backend with one actor), both over ``policy``."""
    from veriloop.training import TrainConfig
    from veriloop.training._backends import ColocatedVLLMBackend
    from veriloop.training._model import load_policy
    from veriloop.training._ray import RayVLLMBackend
    from veriloop.training._rollout_worker import WorkerSpec

    config = TrainConfig.model_validate(
        {
            "model": {"path": str(tiny_model_dir)},
            "rollout": {**VLLM, "max_tokens": 12},
            "pipeline": ONE_ACTOR,
            "run": {"out": str(tmp_path_factory.mktemp("unused"))},
        }
    )
    policy, _ = load_policy(config.model)
    spec = WorkerSpec.from_config(config, policy)
    colocated = ColocatedVLLMBackend(config, spec, policy, tools=None)
    on_ray = RayVLLMBackend(spec, config.pipeline, policy)
    yield policy, colocated, on_ray
    on_ray.close()
    colocated.close()


def _samples(batch: Any) -> list[tuple[str, int, tuple[int, ...]]]:
    return [(t.task_id, t.sample_index, t.completion_ids) for t in batch.trajectories]


def _assert_same_rollouts(on_ray: Any, colocated: Any) -> None:
    """The same tokens, log-probs within 1e-4 (two vLLMs in two processes)."""
    assert _samples(on_ray) == _samples(colocated)
    for ours, theirs in zip(on_ray.trajectories, colocated.trajectories):
        assert torch.allclose(torch.tensor(ours.logprobs), torch.tensor(theirs.logprobs), atol=1e-4)


def test_a_ray_actor_samples_what_the_colocated_engine_samples(backends, digit_tasks):
    _, colocated, on_ray = backends
    tasks = digit_tasks[:3]
    [placement] = on_ray.placements()
    assert placement.pid != os.getpid()  # its vLLM runs in the actor's process
    expected = colocated.rollout(tasks, group_size=3, seed=7)
    batch = on_ray.rollout(tasks, group_size=3, seed=7)
    assert len(batch.trajectories) == 9 and all(t.completion_ids for t in batch.trajectories)
    _assert_same_rollouts(batch, expected)
    assert {t.policy_version for t in batch.trajectories} == {0}


def test_weight_pushes_reach_the_actor_as_they_reach_the_colocated_engine(backends, digit_tasks):
    """Zeroing the final norm makes every next token uniform; restoring it brings the samples back.
    Each backend loads the update it was given, as it was when it was taken, whatever the model
    holds by the time it is loaded (the asynchronous pipeline loads it while the trainer goes on)."""
    policy, colocated, on_ray = backends
    tasks = digit_tasks[3:5]
    before = on_ray.rollout(tasks, group_size=2, seed=3)
    norm = policy.model.norm.weight
    saved = norm.detach().clone()
    vocab = policy.config.vocab_size
    try:
        with torch.no_grad():
            norm.zero_()
        zeroed = {backend: backend.update_of(policy, kept=True) for backend in (colocated, on_ray)}
    finally:
        with torch.no_grad():
            norm.copy_(saved)  # the next update, before the zeroed one is loaded
    for backend, update in zeroed.items():
        backend.set_weights(1, update)
    uniform = on_ray.rollout(tasks, group_size=2, seed=3)
    _assert_same_rollouts(uniform, colocated.rollout(tasks, group_size=2, seed=3))
    logprobs = [lp for t in uniform.trajectories for lp in t.logprobs]
    assert logprobs and all(math.isclose(lp, -math.log(vocab), abs_tol=1e-5) for lp in logprobs)
    assert {t.policy_version for t in uniform.trajectories} == {1}
    for backend in (colocated, on_ray):
        backend.set_weights(2, backend.update_of(policy, kept=False))
    restored = on_ray.rollout(tasks, group_size=2, seed=3)
    assert _samples(restored) == _samples(before)
    assert {t.policy_version for t in restored.trajectories} == {2}


def test_rl_with_vllm_actors_on_ray_trains_and_versions_its_samples(local_ray, make_config, digit_tasks):
    """A short run: vLLM in one Ray actor samples every step with the weights the trainer just pushed."""
    from veriloop.rollout import TrajectoryStore
    from veriloop.training import RLTrainer
    from veriloop.training._ray import RayVLLMBackend

    config = make_config(
        "vllm-ray-rl",
        rollout=VLLM,
        algorithm={"recompute_logprobs": True},
        pipeline=ONE_ACTOR,
        run={"steps": 6},
    )
    trainer = RLTrainer(config, tasks=digit_tasks)
    assert isinstance(trainer.backend, RayVLLMBackend)
    before = {name: t.detach().clone() for name, t in trainer.model.state_dict().items()}
    history = trainer.train()
    assert any(not torch.equal(before[n], t) for n, t in trainer.model.state_dict().items())
    trained = [m for m in history if "reward/mean" in m]
    assert len(trained) >= 4
    # The actor's log-probs are the trainer's own: it sampled with the weights of the last push.
    assert max(m["mismatch/abs_logprob_diff_mean"] for m in trained) < 1e-4
    versions = [t.policy_version for t in TrajectoryStore(trainer.out / "trajectories")]
    assert versions == sorted(versions) and set(versions) == {m["policy_version"] - 1 for m in trained}
    assert trainer.backend.policy_version == trainer.version == 6
