"""The engine-vs-trainer mismatch: measured every step, and corrected by ``algorithm.correction``.

Each test samples one small batch from the tiny model with the trainer's own engine, then builds
the objective's inputs the way ``RLTrainer.step`` does (``loss_inputs``).
"""

import pytest
import torch

from veriloop.algorithms import compute_advantages
from veriloop.training import RLTrainer
from veriloop.training._batch import completion_logprobs, token_batch
from veriloop.training._objective import LossInputs, MismatchTally, has_dropout, loss_inputs, objective

pytestmark = pytest.mark.e2e

MODES = ("none", "token_tis", "token_mask", "sequence_tis", "sequence_mask")


def _sampled(make_config, tasks, name, **rollout):
    """A trainer and one batch its engine sampled: (trainer, batch, advantages (B,))."""
    config = make_config(name=name, rollout={"prompts_per_step": 2, "group_size": 4, **rollout})
    trainer = RLTrainer(config, tasks=tasks)
    trajectories = [t for group in trainer._sample_groups(1).groups for t in group]
    batch = token_batch(trajectories, trainer.engine.pad_token_id)
    advantages = compute_advantages("grpo", torch.tensor([t.reward for t in trajectories]), 4)
    return trainer, batch, advantages[batch.trajectory_index]


def _algorithm(trainer, mode, **bounds):
    algo = trainer.config.algorithm
    return algo.model_copy(update={"correction": algo.correction.model_copy(update={"mode": mode, **bounds})})


def _loss(trainer, inputs, algo):
    """(loss, d loss / d log-probs (B, C)) of the objective on the whole batch."""
    rollout = trainer.config.rollout
    logprobs, _ = completion_logprobs(
        trainer.model, inputs.batch, rollout.temperature, top_k=rollout.top_k, top_p=rollout.top_p
    )
    loss, _ = objective(logprobs, None, inputs, algo, None)
    return loss, torch.autograd.grad(loss, logprobs)[0]


@pytest.mark.parametrize("sampling", [{}, {"top_k": 12, "top_p": 0.9}], ids=["full", "truncated"])
def test_with_the_hf_engine_every_mode_is_the_uncorrected_loss_bit_for_bit(make_config, digit_tasks, sampling):
    """The trainer's engine reports the log-probs the trainer recomputes, bit for bit (under a
    top-k/top-p cut too: both score the same truncated distribution), so every correction weighs
    each token exactly 1 and the loss and its gradient are the uncorrected ones."""
    trainer, batch, advantages = _sampled(make_config, digit_tasks, "hf", **sampling)
    if sampling:  # the engine reports the cut, renormalised distribution: every kept token gains mass
        with torch.no_grad():
            full = completion_logprobs(trainer.model, batch, trainer.config.rollout.temperature)[0]
        assert torch.all((batch.sampler_logprobs - full)[batch.loss_mask.bool()] > 1e-4)
    uncorrected = _loss(trainer, LossInputs(batch, batch.sampler_logprobs, advantages), trainer.config.algorithm)
    for mode in MODES:
        algo = _algorithm(trainer, mode, cap=1.0001, low=0.9999, high=1.0001)  # the tightest bounds allowed
        inputs, metrics = loss_inputs(
            batch, advantages, None, False, algo, lambda: trainer._recomputed(batch), trainer.ranks
        )
        assert metrics["mismatch/abs_logprob_diff_max"] == 0.0 and metrics["mismatch/kl_k3"] == 0.0, mode
        assert metrics["mismatch/masked_token_fraction"] == 0.0 == metrics["mismatch/capped_token_fraction"]
        loss, gradient = _loss(trainer, inputs, algo)
        assert torch.equal(loss, uncorrected[0]) and torch.equal(gradient, uncorrected[1]), mode
    trainer.close()


def _reference_weights(mode, rho, mask, cap, low, high):
    """(B, C) each mode's token weights, written out from its definition."""
    geometric = torch.exp((torch.log(rho) * mask).sum(1, keepdim=True) / mask.sum(1, keepdim=True))  # (B, 1)
    inside = {"token": (rho >= low) & (rho <= high), "sequence": (geometric >= low) & (geometric <= high)}
    weights = {
        "none": torch.ones_like(rho),
        "token_tis": torch.minimum(rho, torch.tensor(cap)),
        "token_mask": inside["token"].float(),
        "sequence_tis": torch.minimum(geometric, torch.tensor(cap)).expand_as(rho),
        "sequence_mask": inside["sequence"].float().expand_as(rho),
    }
    return weights[mode]


def _reference_loss(logprobs, trainer_logprobs, advantages, mask, weights):
    """Token-mean of the clipped surrogate (clip 0.2 / 0.28) against the trainer's log-probs, weighted."""
    ratio = torch.exp(logprobs - trainer_logprobs)
    advantage = advantages[:, None]
    per_token = torch.maximum(-advantage * ratio, -advantage * ratio.clamp(0.8, 1.28))
    return (per_token * weights * mask).sum() / mask.sum()


@pytest.fixture(scope="module")
def perturbed(make_config_in, new_digit_tasks, tmp_path_factory):
    """A batch from an engine computing in another precision (a bfloat16 snapshot of the weights):
    (trainer, batch, advantages, the trainer's log-probs (B, C))."""
    make_config = make_config_in(tmp_path_factory.mktemp("mismatch"))
    trainer, batch, advantages = _sampled(make_config, new_digit_tasks(), "bf16", dtype="bfloat16")
    yield trainer, batch, advantages, trainer._recomputed(batch)
    trainer.close()


# Bounds near 1: the bfloat16 engine's ratios spread about 1e-3 around 1, so each mode acts on some tokens.
BOUNDS = {"cap": 1.0005, "low": 0.9995, "high": 1.0005}
SEQUENCE_BOUNDS = {"cap": 1.0001, "low": 0.9999, "high": 1.0001}


@pytest.mark.parametrize("mode", MODES)
def test_a_perturbed_engine_mismatch_and_loss_against_a_written_out_reference(perturbed, mode):
    trainer, batch, advantages, trainer_logprobs = perturbed
    bounds = SEQUENCE_BOUNDS if mode.startswith("sequence") else BOUNDS
    algo = _algorithm(trainer, mode, **bounds)
    inputs, metrics = loss_inputs(batch, advantages, None, False, algo, lambda: trainer_logprobs, trainer.ranks)
    mask, engine = batch.loss_mask, batch.sampler_logprobs
    on = mask.bool()
    diff = (engine - trainer_logprobs)[on]  # log pi_engine - log pi_trainer per token
    assert metrics["mismatch/abs_logprob_diff_mean"] == pytest.approx(float(diff.abs().mean()), rel=1e-5)
    assert metrics["mismatch/abs_logprob_diff_max"] == pytest.approx(float(diff.abs().max()), rel=1e-6)
    assert metrics["mismatch/kl_k3"] == pytest.approx(float((torch.exp(-diff) + diff - 1).mean()), rel=1e-3)
    assert 0 < metrics["mismatch/abs_logprob_diff_mean"] < 0.1
    rho = torch.exp(trainer_logprobs - engine)  # (B, C)
    weights = _reference_weights(mode, rho, mask, **bounds)
    dropped = float(((weights == 0) & on).sum() / on.sum())
    capped = float(((weights == bounds["cap"]) & on).sum() / on.sum()) if mode.endswith("tis") else 0.0
    assert metrics["mismatch/masked_token_fraction"] == pytest.approx(dropped)
    assert metrics["mismatch/capped_token_fraction"] == pytest.approx(capped, abs=1e-6)
    if mode != "none":  # the bounds make the correction act on some tokens, not all
        assert 0 < dropped + capped < 1, (dropped, capped)
    old = engine if mode == "none" else trainer_logprobs
    loss, gradient = _loss(trainer, inputs, algo)
    logprobs = completion_logprobs(trainer.model, batch, 1.0)[0]
    expected = _reference_loss(logprobs, old, advantages, mask, weights if mode != "none" else 1.0)
    expected_gradient = torch.autograd.grad(expected, logprobs)[0]
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5, abs=1e-7)
    assert torch.allclose(gradient, expected_gradient, rtol=1e-5, atol=1e-8)


def test_every_step_logs_the_mismatch(make_config, digit_tasks):
    """Measured whatever the engine and correction (here: none, with the sampler's log-probs trained on)."""
    trainer = RLTrainer(
        make_config(rollout={"prompts_per_step": 2, "dtype": "bfloat16"}, run={"steps": 1}), digit_tasks
    )
    metrics = trainer.step()
    trainer.close()
    assert 0 < metrics["mismatch/abs_logprob_diff_mean"] <= metrics["mismatch/abs_logprob_diff_max"] < 1
    assert metrics["mismatch/kl_k3"] >= 0 and metrics["mismatch/weight_mean"] == 1.0


def test_the_update_pass_measures_the_mismatch_without_a_pass_of_its_own(perturbed):
    """Uncorrected and measured: the update's first pass gives the figures a recompute would, and
    ``loss_inputs`` recomputes nothing (a step pays no extra forward pass for its ``mismatch/`` metrics)."""
    trainer, batch, advantages, trainer_logprobs = perturbed
    algo = _algorithm(trainer, "none")
    _, by_recompute = loss_inputs(batch, advantages, None, False, algo, lambda: trainer_logprobs, trainer.ranks)

    def recompute():
        raise AssertionError("measured in the update: nothing is recomputed")

    inputs, metrics = loss_inputs(
        batch, advantages, None, False, algo, recompute, trainer.ranks, measured_in_update=True
    )
    assert metrics == {}
    tally = MismatchTally()
    half = len(batch) // 2
    for rows in (slice(0, half), slice(half, len(batch))):  # two micro-batches, as the update runs them
        micro = inputs.select(rows)
        tally.add(completion_logprobs(trainer.model, micro.batch, trainer.config.rollout.temperature)[0], micro.batch)
    by_update = tally.metrics(trainer.ranks)
    assert by_update.keys() == by_recompute.keys()
    assert by_update["mismatch/abs_logprob_diff_mean"] > 0
    for name, value in by_recompute.items():
        assert by_update[name] == pytest.approx(value, rel=1e-4, abs=1e-9), name


def test_a_model_with_dropout_measures_with_a_pass_of_its_own():
    assert not has_dropout(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout(0.0)))
    assert has_dropout(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout(0.1)))
