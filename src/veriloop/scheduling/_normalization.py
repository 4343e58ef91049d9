"""Per-domain reward normalisation, applied to a batch's rewards before advantages.

Domains score on different scales (a partial-credit code reward, a 0/1 math answer, a
weighted rubric); without normalisation the domain with the widest spread dominates the
gradient. Each rule maps rewards (N,), the domain of each sample and the group size to
rewards on a per-domain unit scale, and returns the scale it divided each domain by.
Samples of one group are contiguous and share a domain.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from veriloop.core import Registry

EPS = 1e-6
Stats = dict[str, list[float]]  # domain -> [count, mean, sum of squared deviations]
Normalizer = Callable[[torch.Tensor, Sequence[str], int, Stats], tuple[torch.Tensor, dict[str, float]]]
NORMALIZERS: Registry[Normalizer] = Registry("reward normalization")


def _domain_rows(domains: Sequence[str]) -> dict[str, torch.Tensor]:
    rows: dict[str, list[int]] = {}
    for index, domain in enumerate(domains):
        rows.setdefault(domain, []).append(index)
    return {domain: torch.tensor(indices) for domain, indices in rows.items()}


@NORMALIZERS.register("none")
def no_normalization(
    rewards: torch.Tensor, domains: Sequence[str], group_size: int, stats: Stats
) -> tuple[torch.Tensor, dict[str, float]]:
    """Rewards unchanged."""
    return rewards, {}


@NORMALIZERS.register("running")
def running_normalization(
    rewards: torch.Tensor, domains: Sequence[str], group_size: int, stats: Stats
) -> tuple[torch.Tensor, dict[str, float]]:
    """(r - running mean) / running std of r's domain; the batch joins the statistics first.

    The statistics cover every reward of the domain trained on so far in the run (merged
    batch by batch, exactly), so the scale is steady from step to step.
    """
    out = rewards.clone().float()
    scales = {}
    for domain, rows in _domain_rows(domains).items():
        values = out[rows].double()
        count, mean, m2 = stats.get(domain, [0.0, 0.0, 0.0])
        n, batch_mean = float(values.numel()), float(values.mean())
        batch_m2 = float(((values - batch_mean) ** 2).sum())
        total = count + n
        delta = batch_mean - mean
        mean += delta * n / total
        m2 += batch_m2 + delta * delta * count * n / total
        stats[domain] = [total, mean, m2]
        scales[domain] = math.sqrt(m2 / total)
        out[rows] = (out[rows] - mean) / (scales[domain] + EPS)
    return out, scales


@NORMALIZERS.register("group")
def group_normalization(
    rewards: torch.Tensor, domains: Sequence[str], group_size: int, stats: Stats
) -> tuple[torch.Tensor, dict[str, float]]:
    """r - its group's mean, divided by the root mean square of those deviations over the
    domain's groups that have any spread in this batch: each domain's advantages (for
    ``dr_grpo``, whose centring is then a no-op) have unit root mean square."""
    grouped = rewards.float().view(-1, group_size)  # (groups, G)
    centred = grouped - grouped.mean(dim=1, keepdim=True)  # (groups, G)
    group_domains = list(domains)[::group_size]
    if any(domains[i] != domains[i - i % group_size] for i in range(len(domains))):
        raise ValueError("every group's samples must share one domain")
    scales = {}
    for domain, groups in _domain_rows(group_domains).items():
        block = centred[groups]  # (groups of this domain, G)
        spread = block[(block != 0).any(dim=1)]
        scales[domain] = float(spread.pow(2).mean().sqrt()) if spread.numel() else 0.0
        centred[groups] = block / (scales[domain] + EPS) if scales[domain] > 0 else block
    return centred.view(-1), scales


@dataclass
class NormalizerState:
    stats: Stats = field(default_factory=dict)


class RewardNormalizer:
    """The named rule with its running statistics (checkpointable ``state``)."""

    def __init__(self, name: str = "none", state: NormalizerState | None = None):
        self.name = name
        self.rule = NORMALIZERS.get(name)
        self.state = state or NormalizerState()
        self.last_scales: dict[str, float] = {}

    def __call__(self, rewards: torch.Tensor, domains: Sequence[str], group_size: int) -> torch.Tensor:
        """Rewards (N,) normalised per domain; ``domains`` names the domain of each sample."""
        if len(domains) != rewards.numel():
            raise ValueError(f"{len(domains)} domains for {rewards.numel()} rewards")
        normalised, self.last_scales = self.rule(rewards, domains, group_size, self.state.stats)
        return normalised
