"""Layer 1: the math of policy optimisation (advantages, losses, KL, mismatch corrections), each in a registry."""

from veriloop.algorithms._advantages import ADVANTAGE_ESTIMATORS, compute_advantages
from veriloop.algorithms._corrections import (
    CORRECTIONS,
    Correction,
    CorrectionBounds,
    mismatch_correction,
    mismatch_metrics,
    mismatch_sums,
)
from veriloop.algorithms._losses import (
    AGGREGATIONS,
    KL_ESTIMATORS,
    entropy_from_logits,
    kl_penalty,
    policy_loss,
    truncated_importance_weights,
)

__all__ = [
    "ADVANTAGE_ESTIMATORS",
    "AGGREGATIONS",
    "CORRECTIONS",
    "Correction",
    "CorrectionBounds",
    "KL_ESTIMATORS",
    "compute_advantages",
    "entropy_from_logits",
    "kl_penalty",
    "mismatch_correction",
    "mismatch_metrics",
    "mismatch_sums",
    "policy_loss",
    "truncated_importance_weights",
]
