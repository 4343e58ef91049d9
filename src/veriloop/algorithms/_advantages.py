"""Advantage estimators of the GRPO family. Pure functions on reward tensors, in a registry.

``rewards`` is (N,) with N = groups * group_size, the samples of one prompt contiguous.
Every estimator returns (N,) sequence-level advantages. Per-domain reward normalisation
happens before this (``veriloop.scheduling``), so estimators see already-scaled rewards.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from veriloop.core import Registry

Estimator = Callable[[torch.Tensor, int, float], torch.Tensor]
ADVANTAGE_ESTIMATORS: Registry[Estimator] = Registry("advantage estimator")


def _groups(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    if rewards.ndim != 1:
        raise ValueError(f"rewards must be 1-D (N,), got shape {tuple(rewards.shape)}")
    if group_size < 1 or rewards.numel() % group_size:
        raise ValueError(f"{rewards.numel()} rewards do not split into groups of {group_size}")
    return rewards.float().view(-1, group_size)  # (groups, G)


@ADVANTAGE_ESTIMATORS.register("grpo")
def grpo(rewards: torch.Tensor, group_size: int, eps: float = 1e-6) -> torch.Tensor:
    """(r - group mean) / (group unbiased std + eps). A group of equal rewards gets 0."""
    grouped = _groups(rewards, group_size)
    centred = grouped - grouped.mean(dim=1, keepdim=True)
    std = grouped.std(dim=1, unbiased=True, keepdim=True) if group_size > 1 else torch.zeros_like(centred[:, :1])
    return (centred / (std + eps)).view(-1)


@ADVANTAGE_ESTIMATORS.register("dr_grpo")
def dr_grpo(rewards: torch.Tensor, group_size: int, eps: float = 1e-6) -> torch.Tensor:
    """r - group mean: no std division (Dr. GRPO), so easy and hard groups are not rescaled."""
    grouped = _groups(rewards, group_size)
    return (grouped - grouped.mean(dim=1, keepdim=True)).view(-1)


@ADVANTAGE_ESTIMATORS.register("rloo")
def rloo(rewards: torch.Tensor, group_size: int, eps: float = 1e-6) -> torch.Tensor:
    """r_i - mean of the other G-1 rewards of its group (leave-one-out baseline)."""
    if group_size < 2:
        raise ValueError("rloo needs group_size >= 2")
    grouped = _groups(rewards, group_size)
    others_mean = (grouped.sum(dim=1, keepdim=True) - grouped) / (group_size - 1)
    return (grouped - others_mean).view(-1)


@ADVANTAGE_ESTIMATORS.register("reinforce_pp")
def reinforce_pp(rewards: torch.Tensor, group_size: int, eps: float = 1e-6) -> torch.Tensor:
    """REINFORCE++ with a group baseline: (r - group mean), then whitened over the whole batch."""
    centred = dr_grpo(rewards, group_size, eps)
    if centred.numel() < 2:
        return centred
    return (centred - centred.mean()) / (centred.std(unbiased=True) + eps)


def compute_advantages(name: str, rewards: torch.Tensor, group_size: int, eps: float = 1e-6) -> torch.Tensor:
    """Sequence-level advantages (N,) from rewards (N,) by the named estimator."""
    return ADVANTAGE_ESTIMATORS.get(name)(rewards, group_size, eps)
