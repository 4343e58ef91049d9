import pytest
import torch

from veriloop.algorithms import compute_advantages
from veriloop.scheduling import RewardNormalizer

GROUP = 8


def planted_batch() -> tuple[torch.Tensor, list[str]]:
    """Three domains, 4 groups each, rewards on very different scales: 0-1, 0-100, 0-0.05."""
    generator = torch.Generator().manual_seed(0)
    parts, domains = [], []
    for domain, scale in (("math", 1.0), ("code", 100.0), ("tables", 0.05)):
        for _ in range(4):
            parts.append(scale * torch.rand(GROUP, generator=generator))
            domains += [domain] * GROUP
    return torch.cat(parts), domains


def rms_by_domain(values: torch.Tensor, domains: list[str]) -> dict[str, float]:
    out = {}
    for domain in dict.fromkeys(domains):
        rows = torch.tensor([i for i, d in enumerate(domains) if d == domain])
        out[domain] = float(values[rows].pow(2).mean().sqrt())
    return out


def test_without_normalisation_one_domain_dominates():
    rewards, domains = planted_batch()
    scales = rms_by_domain(compute_advantages("dr_grpo", rewards, GROUP), domains)
    assert scales["code"] / scales["tables"] > 1000


@pytest.mark.parametrize("estimator", ["dr_grpo", "rloo", "reinforce_pp"])
def test_group_normalisation_gives_each_domain_unit_scale_advantages(estimator):
    rewards, domains = planted_batch()
    normaliser = RewardNormalizer("group")
    advantages = compute_advantages(estimator, normaliser(rewards, domains, GROUP), GROUP)
    scales = rms_by_domain(advantages, domains)
    expected = {"dr_grpo": 1.0, "rloo": GROUP / (GROUP - 1)}.get(estimator)
    for domain, scale in scales.items():
        assert scale == pytest.approx(expected, rel=1e-4) if expected else 0.8 < scale < 1.2, (domain, scale)
    assert set(normaliser.last_scales) == {"math", "code", "tables"}
    assert normaliser.last_scales["code"] > 1000 * normaliser.last_scales["tables"]


def test_running_normalisation_uses_per_domain_statistics_across_batches():
    rewards, domains = planted_batch()
    normaliser = RewardNormalizer("running")
    first = rms_by_domain(compute_advantages("dr_grpo", normaliser(rewards, domains, GROUP), GROUP), domains)
    assert all(0.5 < s <= 1.0 for s in first.values()), first
    count, mean, _ = normaliser.state.stats["code"]
    assert count == 32 and mean == pytest.approx(float(rewards[32:64].mean()), rel=1e-6)
    # A second batch from the same distributions keeps every domain on the same scale.
    second = rms_by_domain(
        compute_advantages("dr_grpo", normaliser(rewards.flip(0), domains[::-1], GROUP), GROUP), domains[::-1]
    )
    assert all(0.5 < s <= 1.0 for s in second.values()), second
    assert normaliser.state.stats["code"][0] == 64


def test_none_leaves_rewards_alone_and_groups_must_share_a_domain():
    rewards, domains = planted_batch()
    assert torch.equal(RewardNormalizer("none")(rewards, domains, GROUP), rewards)
    mixed = list(domains)
    mixed[3] = "other"
    with pytest.raises(ValueError, match="share one domain"):
        RewardNormalizer("group")(rewards, mixed, GROUP)
