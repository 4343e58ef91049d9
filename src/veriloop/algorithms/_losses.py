"""Policy-gradient losses, KL estimators and entropy. Pure tensor math.

Shapes: ``logprobs``, ``old_logprobs``, ``ref_logprobs`` and ``mask`` are (B, T) over completion
tokens; ``advantages`` is (B,) per sequence or (B, T) per token.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from veriloop.algorithms._corrections import CorrectionBounds, mismatch_correction
from veriloop.core import Registry

Aggregation = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
AGGREGATIONS: Registry[Aggregation] = Registry("loss aggregation")


@AGGREGATIONS.register("token-mean")
def token_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over every unmasked token of the batch (long answers weigh more, as in DAPO)."""
    return (values * mask).sum() / mask.sum().clamp(min=1)


@AGGREGATIONS.register("seq-mean-token-mean")
def seq_mean_token_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over sequences of each sequence's token mean (original GRPO)."""
    per_sequence = (values * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)
    has_tokens = (mask.sum(dim=1) > 0).float()
    return (per_sequence * has_tokens).sum() / has_tokens.sum().clamp(min=1)


@AGGREGATIONS.register("seq-mean-token-sum")
def seq_mean_token_sum(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over sequences of each sequence's token sum (Dr. GRPO's length-unbiased form)."""
    return (values * mask).sum(dim=1).mean()


KL_ESTIMATORS: Registry[Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = Registry("KL estimator")


@KL_ESTIMATORS.register("k1")
def kl_k1(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """log p - log q: unbiased, high variance, can be negative per token."""
    return logprobs - ref_logprobs


@KL_ESTIMATORS.register("k2")
def kl_k2(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """(log p - log q)^2 / 2: biased, low variance, non-negative."""
    return 0.5 * (logprobs - ref_logprobs) ** 2


@KL_ESTIMATORS.register("k3")
def kl_k3(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """exp(q - p) - (q - p) - 1 on log-probs: unbiased, non-negative (Schulman's k3)."""
    log_ratio = (ref_logprobs - logprobs).clamp(-20, 20)
    return torch.exp(log_ratio) - log_ratio - 1


def kl_penalty(logprobs: torch.Tensor, ref_logprobs: torch.Tensor, estimator: str = "k3") -> torch.Tensor:
    """Per-token KL estimate (B, T) of the policy from the reference."""
    return KL_ESTIMATORS.get(estimator)(logprobs, ref_logprobs)


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Entropy (B, T) of the categorical distributions given by logits (B, T, V)."""
    log_probs = torch.log_softmax(logits.float(), dim=-1)
    return -(log_probs.exp() * log_probs).sum(dim=-1)


def policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.28,
    aggregation: str = "token-mean",
    dual_clip: float | None = None,
    importance_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """PPO clipped surrogate with asymmetric clipping (DAPO's clip-higher), optional dual clip.

    Per token: max(-A * r, -A * clip(r, 1 - clip_low, 1 + clip_high)), with
    r = exp(logprobs - old_logprobs). With ``dual_clip = c > 1``, tokens with A < 0 are
    additionally capped at -A * c, so a huge ratio on a bad token cannot blow up the loss.
    ``importance_weights`` (B, T), when given, multiply each token's term (no gradient flows
    through them): a mismatch correction's weights (``CORRECTIONS``), 0 on a dropped token.
    Returns the aggregated loss and float metrics.
    """
    mask = mask.to(logprobs.dtype)
    if advantages.ndim == 1:
        advantages = advantages[:, None]  # (B, 1) broadcast over tokens
    advantages = advantages.to(logprobs.dtype)
    log_ratio = logprobs - old_logprobs
    ratio = torch.exp(log_ratio)  # (B, T)
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    per_token = torch.maximum(unclipped, clipped)
    if dual_clip is not None:
        if dual_clip <= 1.0:
            raise ValueError("dual_clip must be > 1")
        capped = torch.minimum(per_token, -advantages * dual_clip)
        per_token = torch.where(advantages < 0, capped, per_token)
    if importance_weights is not None:
        per_token = per_token * importance_weights.detach().to(per_token.dtype)
    loss = AGGREGATIONS.get(aggregation)(per_token, mask)
    with torch.no_grad():
        tokens = mask.sum().clamp(min=1)
        was_clipped = (clipped > unclipped).to(mask.dtype)
        low = (ratio < 1.0 - clip_low) & (advantages < 0)
        high = (ratio > 1.0 + clip_high) & (advantages > 0)
        masked_ratio = ratio[mask.bool()]
        metrics = {
            "clip_fraction": float((was_clipped * mask).sum() / tokens),
            "clip_low_fraction": float((low.to(mask.dtype) * mask).sum() / tokens),
            "clip_high_fraction": float((high.to(mask.dtype) * mask).sum() / tokens),
            "approx_kl": float((((ratio - 1) - log_ratio) * mask).sum() / tokens),
            "ratio_mean": float(masked_ratio.mean()) if masked_ratio.numel() else 1.0,
            "ratio_max": float(masked_ratio.max()) if masked_ratio.numel() else 1.0,
            "ratio_min": float(masked_ratio.min()) if masked_ratio.numel() else 1.0,
        }
    return loss, metrics


def truncated_importance_weights(
    proximal_logprobs: torch.Tensor, behaviour_logprobs: torch.Tensor, cap: float
) -> torch.Tensor:
    """(B, T) weights min(pi_prox / pi_behaviour, cap) that correct stale samples (truncated IS).

    ``behaviour_logprobs`` are the sampler's (the stale version that generated the tokens);
    ``proximal_logprobs`` are the trainer's current policy before the update. The ``token_tis``
    correction's weights (``mismatch_correction``).
    """
    mask = torch.ones_like(proximal_logprobs)
    bounds = CorrectionBounds(cap=cap)
    return mismatch_correction("token_tis", proximal_logprobs, behaviour_logprobs, mask, bounds).weights
