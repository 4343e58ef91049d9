"""Layer 1: the math of policy optimisation (advantages, losses, KL), each in a registry."""

from veriloop.algorithms._advantages import ADVANTAGE_ESTIMATORS, compute_advantages
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
    "KL_ESTIMATORS",
    "compute_advantages",
    "entropy_from_logits",
    "kl_penalty",
    "policy_loss",
    "truncated_importance_weights",
]
