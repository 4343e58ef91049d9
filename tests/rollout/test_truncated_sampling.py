"""Top-k/top-p sampling: which tokens are kept, and a policy gradient that stays unbiased under the cut."""

import math

import pytest
import torch

from veriloop.rollout import truncated_logprobs, truncation_mask

PROBS = torch.tensor([0.5, 0.2, 0.15, 0.1, 0.05])
REWARDS = torch.tensor([0.0, 1.0, 0.3, 2.0, -1.0])  # one reward per action


def test_truncation_mask_by_hand():
    logits = torch.log(PROBS)
    assert truncation_mask(logits) is None
    assert truncation_mask(logits, top_p=0.75).tolist() == [True, True, True, False, False]
    assert truncation_mask(logits, top_k=2).tolist() == [True, True, False, False, False]
    # top-k first, then top-p on the renormalised three: 0.588, 0.235, 0.176 -> the mass before the
    # third is 0.824 >= 0.8, so two are kept.
    assert truncation_mask(logits, top_k=3, top_p=0.8).tolist() == [True, True, False, False, False]


def test_truncated_logprobs_renormalise_over_the_kept_tokens():
    logits = torch.log(PROBS)[None].repeat(2, 1)  # (2, V)
    values = truncated_logprobs(logits, torch.tensor([0, 2]), top_p=0.75)
    assert values.tolist() == pytest.approx([math.log(0.5 / 0.85), math.log(0.15 / 0.85)], rel=1e-6)
    # A token the cut drops (one an engine's rounding kept) is scored as if kept: finite.
    outside = truncated_logprobs(logits[:1], torch.tensor([4]), top_p=0.75)
    assert outside.item() == pytest.approx(math.log(0.05 / 0.9), rel=1e-6)


def _exact_gradient(logits, temperature, top_k, top_p):
    """d/dz of the expected reward under the truncated sampling distribution (the kept set held fixed)."""
    z = logits.clone().requires_grad_()
    scaled = z / temperature
    keep = truncation_mask(scaled.detach(), top_k, top_p)
    probs = torch.softmax(scaled.masked_fill(~keep, float("-inf")), dim=-1)
    (probs * REWARDS).sum().backward()
    return z.grad, probs.detach()


def _per_sample_gradients(logits, temperature, actions, logprobs_of):
    """(N, V) R(a_i) * d log p(a_i) / dz, one row per sampled action."""
    z = logits[None].repeat(len(actions), 1).requires_grad_()
    (REWARDS[actions] * logprobs_of(z / temperature, actions)).sum().backward()
    return z.grad


@pytest.mark.parametrize(("temperature", "top_k", "top_p"), [(1.0, 3, 1.0), (0.8, 0, 0.9), (1.3, 4, 0.95)])
def test_policy_gradient_with_truncated_logprobs_is_unbiased(temperature, top_k, top_p):
    """The REINFORCE estimate R(a) grad log p(a), a drawn from the truncated distribution and p its
    renormalised probability, converges to the exact gradient of the expected reward under that
    distribution; with the untruncated log-probs it does not."""
    generator = torch.Generator().manual_seed(0)
    logits = torch.log(PROBS) + 0.3 * torch.randn(5, generator=generator)
    exact, probs = _exact_gradient(logits, temperature, top_k, top_p)
    assert 1 < int((probs > 0).sum()) < len(probs)  # the cut drops some tokens and leaves a choice
    actions = torch.multinomial(probs, 40_000, replacement=True, generator=generator)  # (N,)

    def truncated(scaled, targets):
        return truncated_logprobs(scaled, targets, top_k, top_p)

    def untruncated(scaled, targets):
        return torch.log_softmax(scaled, dim=-1).gather(-1, targets[:, None])[:, 0]

    samples = _per_sample_gradients(logits, temperature, actions, truncated)  # (N, V)
    standard_error = samples.std(0) / math.sqrt(len(actions))
    assert torch.all((samples.mean(0) - exact).abs() <= 4 * standard_error + 1e-6), (samples.mean(0), exact)
    biased = _per_sample_gradients(logits, temperature, actions, untruncated)
    bias_error = biased.std(0) / math.sqrt(len(actions))
    assert torch.any((biased.mean(0) - exact).abs() > 8 * bias_error + 1e-3)
