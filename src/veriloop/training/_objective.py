"""The RL objective: what the trainer minimises on each micro-batch, and the inputs it needs.

    loss = clipped policy loss  (+ beta * KL to the reference, when algorithm.kl_mode = loss)
                                (- entropy_coef * entropy, when entropy_coef > 0)

each term aggregated over the completion tokens by ``algorithm.aggregation``, and each token's
policy term weighted by the mismatch correction (``algorithm.correction``). The math itself
lives in ``veriloop.algorithms`` (``policy_loss``, ``kl_penalty``, ``CORRECTIONS``); this module
chooses the ratio's denominator (``loss_inputs``) and adds the terms up.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from veriloop.algorithms import (
    AGGREGATIONS,
    CorrectionBounds,
    kl_penalty,
    mismatch_correction,
    mismatch_metrics,
    mismatch_sums,
    policy_loss,
)
from veriloop.training._batch import TokenBatch
from veriloop.training._config import AlgorithmSection


@dataclasses.dataclass(frozen=True)
class LossInputs:
    """Everything the objective needs about one batch besides the current policy's log-probs.

    Tensors are on the CPU, row ``i`` of each belonging to sequence ``i`` of ``batch``.
    """

    batch: TokenBatch
    old_logprobs: torch.Tensor  # (B, C) the ratio's denominator: sampler's or recomputed log-probs
    advantages: torch.Tensor  # (B,)
    reference_logprobs: torch.Tensor | None = None  # (B, C) under the reference policy (KL in the loss)
    importance_weights: torch.Tensor | None = None  # (B, C) the correction's weights (0: token dropped), no grad
    stale: bool = False  # sampled by an older policy than the trainer's (asynchronous pipeline)

    def __len__(self) -> int:
        return len(self.batch)

    def select(self, rows: slice) -> LossInputs:
        """The same inputs for the sequences ``rows`` only (a micro-batch)."""
        return LossInputs(
            self.batch.select(rows),
            self.old_logprobs[rows],
            self.advantages[rows],
            None if self.reference_logprobs is None else self.reference_logprobs[rows],
            None if self.importance_weights is None else self.importance_weights[rows],
            self.stale,
        )


def objective(
    logprobs: torch.Tensor,
    entropy: torch.Tensor | None,
    inputs: LossInputs,
    algo: AlgorithmSection,
    dual_clip: float | None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The loss of one micro-batch (a scalar with grad) and its statistics (``policy_loss``,
    ``kl``, ``entropy`` and those of ``policy_loss``).

    ``logprobs`` (B, C): the current policy's, with grad; ``entropy`` (B, C), or None to leave the
    entropy bonus out; ``dual_clip``: the cap of the ratio for negative advantages in force for
    this batch (``algo.dual_clip``, or lower for stale samples).
    """
    aggregate = AGGREGATIONS.get(algo.aggregation)
    device = logprobs.device
    mask = inputs.batch.loss_mask.to(device)  # (B, C) 1 on the tokens the model generated
    importance = None if inputs.importance_weights is None else inputs.importance_weights.to(device)
    loss, stats = policy_loss(
        logprobs,
        inputs.old_logprobs.to(device),
        inputs.advantages.to(device),
        mask,
        clip_low=algo.clip_low,
        clip_high=algo.clip_high,
        aggregation=algo.aggregation,
        dual_clip=dual_clip,
        importance_weights=importance,
    )
    stats["policy_loss"] = float(loss.detach())
    if inputs.reference_logprobs is not None and algo.kl_mode == "loss":
        kl = aggregate(kl_penalty(logprobs, inputs.reference_logprobs.to(device), algo.kl_estimator), mask)
        loss = loss + algo.beta * kl
        stats["kl"] = float(kl.detach())
    if entropy is not None:
        entropy_mean = aggregate(entropy, mask)
        loss = loss - algo.entropy_coef * entropy_mean
        stats["entropy"] = float(entropy_mean.detach())
    return loss, stats


def loss_inputs(
    batch: TokenBatch,
    advantages: torch.Tensor,
    reference_logprobs: torch.Tensor | None,
    stale: bool,
    algo: AlgorithmSection,
    recompute: Callable[[], torch.Tensor],
    ranks: Any,
    measured_in_update: bool = False,
) -> tuple[LossInputs, dict[str, float]]:
    """The objective's inputs for ``batch`` (the ratio's denominator, the correction's weights) and
    the ``mismatch/`` metrics, summed over ``ranks``.

    ``recompute()`` gives the trainer's log-probs (B, C) of the batch under its current weights
    (one pass without grad); it runs when a correction, ``recompute_logprobs`` or
    ``correction.measure`` needs it. With ``algorithm.correction.mode`` other than none, the
    objective is decoupled (as in AReaL): the ratio is taken against the recomputed log-probs,
    and each token is weighted by the correction of rho = pi_trainer / pi_engine, which covers
    the engine's numerics and, for stale samples, the older weights alike. With none: the
    sampler's log-probs (fresh samples with ``recompute_logprobs``: the recomputed ones), unweighted.
    ``measured_in_update``: the caller measures the mismatch from the update's own first pass
    (``MismatchTally``), so measuring alone recomputes nothing here.
    """
    correction, sampler = algo.correction, batch.sampler_logprobs  # (B, C) the engine's
    corrected = correction.mode != "none"
    measure = correction.measure and not measured_in_update
    if not (corrected or algo.recompute_logprobs or measure):
        return LossInputs(batch, sampler, advantages, reference_logprobs, stale=stale), {}
    recomputed = recompute()  # (B, C) the trainer's, before the update
    bounds = CorrectionBounds(correction.cap, correction.low, correction.high)
    verdict = mismatch_correction(correction.mode, recomputed, sampler, batch.loss_mask, bounds)
    metrics = _summed_over_ranks(mismatch_sums(recomputed, sampler, batch.loss_mask, verdict), ranks)
    if corrected:
        return LossInputs(batch, recomputed, advantages, reference_logprobs, verdict.weights, stale), metrics
    old = recomputed if algo.recompute_logprobs and not stale else sampler
    return LossInputs(batch, old, advantages, reference_logprobs, stale=stale), metrics


class MismatchTally:
    """The ``mismatch/`` metrics of a batch read off the update's first pass: before the first
    optimizer step, its log-probs are the trainer's under the weights the batch was scored with,
    the very ones ``recompute()`` would give, so the measurement costs no pass of its own. Valid
    only for a model without dropout (``has_dropout``) and with the uncorrected objective."""

    def __init__(self) -> None:
        self.sums: dict[str, float] = {}

    def add(self, logprobs: torch.Tensor, batch: TokenBatch) -> None:
        """Count one micro-batch: ``logprobs`` (b, C) of its completion tokens under the trainer."""
        trainer = logprobs.detach().to(batch.sampler_logprobs.device)  # (b, C)
        verdict = mismatch_correction("none", trainer, batch.sampler_logprobs, batch.loss_mask)
        for name, value in mismatch_sums(trainer, batch.sampler_logprobs, batch.loss_mask, verdict).items():
            old = self.sums.get(name, 0.0)
            self.sums[name] = max(old, value) if name == "abs_max" else old + value

    def metrics(self, ranks: Any) -> dict[str, float]:
        """The metrics over every rank's micro-batches (a collective: every rank calls it)."""
        return _summed_over_ranks(self.sums or _NO_TOKENS, ranks)


_NO_TOKENS = dict.fromkeys(
    ("tokens", "sequences", "abs_sum", "abs_max", "k1_sum", "k3_sum", "weight_sum")
    + ("masked_tokens", "capped_tokens", "masked_sequences", "capped_sequences"),
    0.0,
)


def has_dropout(model: torch.nn.Module) -> bool:
    """Whether ``model``'s forward in train mode differs from eval: a dropout module or an
    attention dropout with a rate above 0."""
    config = getattr(model, "config", None)
    if float(getattr(config, "attention_dropout", 0.0) or 0.0) > 0:
        return True
    return any(isinstance(m, torch.nn.Dropout) and m.p > 0 for m in model.modules())


def _summed_over_ranks(sums: dict[str, float], ranks: Any) -> dict[str, float]:
    """``mismatch_metrics`` of every rank's rows: the sums added up, the largest difference the largest."""
    names = sorted(name for name in sums if name != "abs_max")
    totals = dict(zip(names, ranks.total([sums[name] for name in names])))
    return mismatch_metrics({**totals, "abs_max": max(ranks.gather(sums["abs_max"]))})
