import math

import pytest
import torch

from veriloop.algorithms import entropy_from_logits, kl_penalty, policy_loss


def test_on_policy_loss_is_minus_mean_advantage():
    logprobs = torch.log(torch.tensor([[0.5, 0.25], [0.1, 0.2]]))
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    loss, metrics = policy_loss(logprobs, logprobs.clone(), torch.tensor([2.0, -1.0]), mask, aggregation="token-mean")
    assert loss.item() == pytest.approx((-2 - 2 + 1) / 3)
    assert metrics["clip_fraction"] == 0 and metrics["ratio_mean"] == pytest.approx(1.0)
    loss_seq, _ = policy_loss(
        logprobs, logprobs.clone(), torch.tensor([2.0, -1.0]), mask, aggregation="seq-mean-token-mean"
    )
    assert loss_seq.item() == pytest.approx((-2 + 1) / 2)


def test_asymmetric_clipping_by_hand():
    old = torch.zeros(1, 4)
    # ratios 1.5 (A>0, clipped at 1.28), 0.5 (A>0, not clipped: min side), 0.5 (A<0, clipped at 0.8), 1.5 (A<0, not clipped)
    new = torch.log(torch.tensor([[1.5, 0.5, 0.5, 1.5]]))
    adv = torch.tensor([[1.0, 1.0, -1.0, -1.0]])
    loss, metrics = policy_loss(new, old, adv, torch.ones(1, 4), clip_low=0.2, clip_high=0.28)
    per_token = [-1.28, -0.5, 0.8, 1.5]
    assert loss.item() == pytest.approx(sum(per_token) / 4, abs=1e-6)
    assert metrics["clip_fraction"] == pytest.approx(0.5)
    assert metrics["clip_high_fraction"] == pytest.approx(0.25) and metrics["clip_low_fraction"] == pytest.approx(0.25)


def test_dual_clip_caps_negative_advantage_tokens():
    new = torch.log(torch.tensor([[10.0]]))
    loss, _ = policy_loss(new, torch.zeros(1, 1), torch.tensor([-1.0]), torch.ones(1, 1), dual_clip=3.0)
    assert loss.item() == pytest.approx(3.0)
    loss_no_cap, _ = policy_loss(new, torch.zeros(1, 1), torch.tensor([-1.0]), torch.ones(1, 1))
    assert loss_no_cap.item() == pytest.approx(10.0)


def test_gradient_flows_only_through_unclipped_tokens():
    new = torch.log(torch.tensor([[1.5, 1.1]])).requires_grad_()
    loss, _ = policy_loss(new, torch.zeros(1, 2), torch.tensor([1.0]), torch.ones(1, 2))
    loss.backward()
    assert new.grad[0, 0].item() == 0.0  # clipped at 1.28: no gradient
    assert new.grad[0, 1].item() == pytest.approx(-1.1 / 2)  # d(-r)/dlogp = -r, averaged over 2 tokens


def test_kl_estimators_by_hand():
    p = torch.tensor([[math.log(0.5)]])
    q = torch.tensor([[math.log(0.25)]])
    assert kl_penalty(p, q, "k1").item() == pytest.approx(math.log(2))
    assert kl_penalty(p, q, "k2").item() == pytest.approx(0.5 * math.log(2) ** 2)
    assert kl_penalty(p, q, "k3").item() == pytest.approx(0.5 - math.log(0.5) - 1)
    assert kl_penalty(p, p, "k3").item() == 0.0


def test_entropy_of_uniform_and_certain():
    logits = torch.tensor([[[0.0, 0.0, 0.0, 0.0], [100.0, 0.0, 0.0, 0.0]]])
    entropy = entropy_from_logits(logits)
    assert entropy[0, 0].item() == pytest.approx(math.log(4)) and entropy[0, 1].item() == pytest.approx(0.0, abs=1e-6)


def test_importance_weights_scale_each_token_and_carry_no_gradient():
    from veriloop.algorithms import truncated_importance_weights

    behaviour = torch.log(torch.tensor([[0.5, 0.1, 0.4]]))
    proximal = torch.log(torch.tensor([[0.25, 0.4, 0.4]]))
    weights = truncated_importance_weights(proximal, behaviour, cap=2.0)
    assert weights[0].tolist() == pytest.approx([0.5, 2.0, 1.0])  # 0.4 / 0.1 = 4 truncated to 2
    new = proximal.clone().requires_grad_()
    loss, _ = policy_loss(
        new, proximal, torch.tensor([1.0]), torch.ones(1, 3), importance_weights=weights.requires_grad_()
    )
    assert loss.item() == pytest.approx(-(0.5 + 2.0 + 1.0) / 3)  # ratio 1: each token is -A * w
    loss.backward()
    assert new.grad[0].tolist() == pytest.approx([-0.5 / 3, -2.0 / 3, -1.0 / 3])
    assert weights.grad is None
