"""Corrections for the gap between the policy that sampled a batch and the one that trains on it.

Two log-probs of the same tokens: the engine's (``behaviour``, what the sampler reported) and the
trainer's (``proximal``, recomputed under the trainer's weights before the update). They differ
by the engine's numerics (another kernel, precision or runtime) and, in asynchronous training, by
staleness (older weights). The decoupled objective takes the PPO ratio against the proximal
policy and multiplies each token's term by a weight from the per-token ratio
``rho = pi_proximal / pi_behaviour``; a correction decides that weight.

Every correction is a plain callable in ``CORRECTIONS``: ``(log_rho, mask, bounds) -> Correction``.
Shapes: ``log_rho`` and ``mask`` are (B, T) over completion tokens. Pure tensor math.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from veriloop.core import Registry


@dataclass(frozen=True)
class CorrectionBounds:
    """``cap``: the most a truncated weight may be; ``low``/``high``: the band of ratios a masking mode keeps."""

    cap: float = 2.0
    low: float = 0.5
    high: float = 2.0


@dataclass(frozen=True)
class Correction:
    """A correction's verdict on one batch.

    ``weights`` (B, T): each token's multiplier of its policy-gradient term (no gradient flows
    through it; 0 drops the token). ``masked`` and ``capped`` (B, T) bool: tokens a mode dropped,
    tokens whose weight it truncated at the cap.
    """

    weights: torch.Tensor
    masked: torch.Tensor
    capped: torch.Tensor


CorrectionFn = Callable[[torch.Tensor, torch.Tensor, CorrectionBounds], Correction]
CORRECTIONS: Registry[CorrectionFn] = Registry("mismatch correction")

_LOG_RATIO_LIMIT = 20.0  # exp(20) ~ 5e8: far past any cap, and never inf


def _none_flags(log_rho: torch.Tensor) -> torch.Tensor:
    return torch.zeros_like(log_rho, dtype=torch.bool)


def sequence_log_ratio(log_rho: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(B, 1) the log of each sequence's geometric-mean ratio: the mean of its tokens' log-ratios."""
    mask = mask.to(log_rho.dtype)
    return ((log_rho * mask).sum(1) / mask.sum(1).clamp(min=1))[:, None]


@CORRECTIONS.register("none")
def no_correction(log_rho: torch.Tensor, mask: torch.Tensor, bounds: CorrectionBounds) -> Correction:
    """Weight 1 everywhere: the mismatch is measured, not corrected."""
    return Correction(torch.ones_like(log_rho), _none_flags(log_rho), _none_flags(log_rho))


@CORRECTIONS.register("token_tis")
def token_tis(log_rho: torch.Tensor, mask: torch.Tensor, bounds: CorrectionBounds) -> Correction:
    """Truncated importance sampling per token: weight min(rho, cap) (Yao et al.'s TIS; IMPALA's rho-bar)."""
    rho = torch.exp(log_rho.clamp(-_LOG_RATIO_LIMIT, _LOG_RATIO_LIMIT))  # (B, T)
    return Correction(rho.clamp(max=bounds.cap), _none_flags(log_rho), rho > bounds.cap)


@CORRECTIONS.register("token_mask")
def token_mask(log_rho: torch.Tensor, mask: torch.Tensor, bounds: CorrectionBounds) -> Correction:
    """Drop each token whose ratio leaves [low, high], keep the rest at weight 1 (IcePop)."""
    rho = torch.exp(log_rho.clamp(-_LOG_RATIO_LIMIT, _LOG_RATIO_LIMIT))  # (B, T)
    outside = (rho < bounds.low) | (rho > bounds.high)
    return Correction((~outside).to(log_rho.dtype), outside, _none_flags(log_rho))


@CORRECTIONS.register("sequence_tis")
def sequence_tis(log_rho: torch.Tensor, mask: torch.Tensor, bounds: CorrectionBounds) -> Correction:
    """Every token of a sequence weighted min(geometric-mean ratio of the sequence, cap)."""
    rho = torch.exp(sequence_log_ratio(log_rho, mask).clamp(-_LOG_RATIO_LIMIT, _LOG_RATIO_LIMIT))  # (B, 1)
    weights = rho.clamp(max=bounds.cap).expand_as(log_rho)
    return Correction(weights, _none_flags(log_rho), (rho > bounds.cap).expand_as(log_rho))


@CORRECTIONS.register("sequence_mask")
def sequence_mask(log_rho: torch.Tensor, mask: torch.Tensor, bounds: CorrectionBounds) -> Correction:
    """Drop whole sequences whose geometric-mean ratio leaves [low, high] (TRL's ``sequence_mask``)."""
    rho = torch.exp(sequence_log_ratio(log_rho, mask).clamp(-_LOG_RATIO_LIMIT, _LOG_RATIO_LIMIT))  # (B, 1)
    outside = ((rho < bounds.low) | (rho > bounds.high)).expand_as(log_rho)
    return Correction((~outside).to(log_rho.dtype), outside, _none_flags(log_rho))


def mismatch_correction(
    mode: str,
    proximal_logprobs: torch.Tensor,
    behaviour_logprobs: torch.Tensor,
    mask: torch.Tensor,
    bounds: CorrectionBounds = CorrectionBounds(),
) -> Correction:
    """The correction ``mode`` (a name in ``CORRECTIONS``) of tokens sampled by ``behaviour`` and trained
    against ``proximal``: (B, T) log-probs of the same tokens; ``mask`` (B, T) 1 on the tokens trained on."""
    log_rho = (proximal_logprobs - behaviour_logprobs).detach()  # (B, T) log pi_proximal / pi_behaviour
    return CORRECTIONS.get(mode)(log_rho, mask, bounds)


def mismatch_sums(
    proximal_logprobs: torch.Tensor, behaviour_logprobs: torch.Tensor, mask: torch.Tensor, correction: Correction
) -> dict[str, float]:
    """Sums over one batch's masked tokens and sequences that ``mismatch_metrics`` turns into the logged
    figures; sums (not means) so that several ranks' batches add up. ``abs_max`` is a max, not a sum."""
    on = mask.bool()  # (B, T)
    rows = on.any(1)  # (B,) sequences with tokens
    diff = (behaviour_logprobs - proximal_logprobs)[on]  # log pi_engine - log pi_trainer, per token
    masked, capped = correction.masked & on, correction.capped & on
    return {
        "tokens": float(on.sum()),
        "sequences": float(rows.sum()),
        "abs_sum": float(diff.abs().sum()),
        "abs_max": float(diff.abs().max()) if diff.numel() else 0.0,
        "k1_sum": float(diff.sum()),
        "k3_sum": float((torch.exp((-diff).clamp(max=_LOG_RATIO_LIMIT)) + diff - 1).sum()),
        "weight_sum": float(correction.weights[on].sum()),
        "masked_tokens": float(masked.sum()),
        "capped_tokens": float(capped.sum()),
        "masked_sequences": float((masked.any(1) & rows).sum()),
        "capped_sequences": float((capped.any(1) & rows).sum()),
    }


def mismatch_metrics(sums: dict[str, float]) -> dict[str, float]:
    """The ``mismatch/`` metrics from ``mismatch_sums`` (summed over ranks; ``abs_max`` their max).

    ``kl_k3`` and ``kl_k1`` estimate KL(pi_engine || pi_trainer) per token from the engine's own
    samples (Schulman's k3: non-negative, unbiased; k1: the plain log-ratio mean).
    """
    tokens, sequences = max(sums["tokens"], 1.0), max(sums["sequences"], 1.0)
    return {
        "mismatch/abs_logprob_diff_mean": sums["abs_sum"] / tokens,
        "mismatch/abs_logprob_diff_max": sums["abs_max"],
        "mismatch/kl_k3": sums["k3_sum"] / tokens,
        "mismatch/kl_k1": sums["k1_sum"] / tokens,
        "mismatch/weight_mean": sums["weight_sum"] / tokens if sums["tokens"] else 1.0,
        "mismatch/masked_token_fraction": sums["masked_tokens"] / tokens,
        "mismatch/capped_token_fraction": sums["capped_tokens"] / tokens,
        "mismatch/masked_sequence_fraction": sums["masked_sequences"] / sequences,
        "mismatch/capped_sequence_fraction": sums["capped_sequences"] / sequences,
    }
