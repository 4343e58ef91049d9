"""Partial rollouts: weights published while a batch decodes are loaded between two decode steps,
the batch goes on with them, and each token carries the version that sampled it. Tokens before the
update are the old policy's exactly, tokens after it the new one's (their contexts prefilled again
under the new weights), and a correction weighs each token by its own behaviour log-prob."""

import copy

import pytest
import torch

from veriloop.algorithms import CorrectionBounds, mismatch_correction
from veriloop.core import Task
from veriloop.rollout import EpisodeConfig, HFEngine, SamplingParams, rollout

SWITCH_AFTER = 3  # the update lands after the third decode step


@pytest.fixture(scope="module")
def models(tiny_model_dir):
    """(engine over its own copy of the tiny model, the perturbed weights published mid-batch)."""
    engine = HFEngine(str(tiny_model_dir))
    generator = torch.Generator().manual_seed(0)
    newer = {
        name: tensor + 0.05 * torch.randn(tensor.shape, generator=generator)
        for name, tensor in engine.model.state_dict().items()
        if tensor.is_floating_point()
    }
    return engine, newer


def _publish_after(steps: int, version: int, weights):
    """A ``midway_weights`` source whose weights appear at its ``steps``-th call (once)."""
    calls = {"n": 0}

    def take():
        calls["n"] += 1
        return (version, weights) if calls["n"] == steps else None

    return take


def _teacher_forced(model, prompt_ids, completion_ids):
    """(T,) log-probs of ``completion_ids`` after ``prompt_ids`` under ``model``, in one forward."""
    ids = torch.tensor([list(prompt_ids) + list(completion_ids)])
    with torch.no_grad():
        logits = model(input_ids=ids).logits.float()[0, len(prompt_ids) - 1 : -1]
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(completion_ids)[:, None])[:, 0]


def test_a_sample_straddling_an_update_carries_both_versions_and_each_tokens_own_logprob(models):
    engine, newer = models
    old = copy.deepcopy(engine.model).eval()
    saved = {k: v.clone() for k, v in engine.model.state_dict().items()}
    engine.update_weights(None, 0)
    engine.midway_weights = _publish_after(SWITCH_AFTER, 1, newer)
    try:
        params = SamplingParams(n=2, temperature=1.0, max_tokens=8, seed=11, ignore_eos=True)
        samples = engine.generate([[1, 5, 9, 14]], params)[0]
    finally:
        engine.midway_weights = None
    assert engine.policy_version == 1
    for sample in samples:
        assert sample.versions == (0,) * SWITCH_AFTER + (1,) * (8 - SWITCH_AFTER)
        before = _teacher_forced(old, [1, 5, 9, 14], sample.token_ids)
        after = _teacher_forced(engine.model, [1, 5, 9, 14], sample.token_ids)
        logprobs = torch.tensor(sample.logprobs)
        torch.testing.assert_close(logprobs[:SWITCH_AFTER], before[:SWITCH_AFTER], atol=1e-4, rtol=0)
        torch.testing.assert_close(logprobs[SWITCH_AFTER:], after[SWITCH_AFTER:], atol=1e-4, rtol=0)
        assert (logprobs[SWITCH_AFTER:] - before[SWITCH_AFTER:]).abs().max() > 1e-3  # the update mattered

        # The correction against the trainer (now at version 1) weighs each token by its own
        # behaviour log-prob: the new policy's tokens have ratio 1, the old policy's do not.
        mask = torch.ones(1, len(sample.token_ids))
        verdict = mismatch_correction("token_tis", after[None], logprobs[None], mask, CorrectionBounds(cap=100.0))
        torch.testing.assert_close(verdict.weights[0, SWITCH_AFTER:], torch.ones(8 - SWITCH_AFTER), atol=1e-3, rtol=0)
        assert (verdict.weights[0, :SWITCH_AFTER] - 1).abs().max() > 1e-3
    engine.update_weights(saved, 0)


def test_an_episode_records_each_tokens_version_and_its_oldest_as_its_own(models):
    engine, newer = models
    saved = {k: v.clone() for k, v in engine.model.state_dict().items()}
    engine.update_weights(None, 4)
    engine.midway_weights = _publish_after(SWITCH_AFTER, 5, newer)
    task = Task(id="t", domain="arith", prompt="What is 1+1?", verifier={"kind": "exact"}, gold="2")
    try:
        config = EpisodeConfig(max_tokens_per_turn=8, temperature=1.0)
        (trajectory,) = rollout([task], engine, config, group_size=1, seed=3).trajectories
    finally:
        engine.midway_weights = None
    generated = [v for v, m in zip(trajectory.token_versions, trajectory.loss_mask) if m]
    assert len(trajectory.token_versions) == len(trajectory.completion_ids)
    assert len(generated) > SWITCH_AFTER  # this seed's sample outlives the update
    assert generated == [4] * SWITCH_AFTER + [5] * (len(generated) - SWITCH_AFTER)
    assert trajectory.policy_version == 4  # its oldest token's, though the engine is at 5 now
    assert engine.policy_version == 5
    engine.update_weights(saved, 0)


def test_partial_rollouts_are_refused_where_they_cannot_apply(tiny_model_dir):
    from veriloop.training import TrainConfig

    base = {"model": {"path": str(tiny_model_dir)}}
    with pytest.raises(ValueError, match=r"needs pipeline.mode=async, pipeline.max_staleness >= 1"):
        TrainConfig.model_validate({**base, "pipeline": {"partial_rollouts": True, "max_staleness": 0}})
    with pytest.raises(ValueError, match=r"needs rollout.engine=hf"):
        TrainConfig.model_validate(
            {**base, "rollout": {"engine": "vllm"}, "pipeline": {"partial_rollouts": True, "mode": "async"}}
        )
    config = TrainConfig.model_validate({**base, "pipeline": {"partial_rollouts": True, "mode": "async"}})
    assert config.pipeline.partial_rollouts
