import math

import pytest
import torch

from veriloop.algorithms import compute_advantages
from veriloop.core import UserError


def test_grpo_by_hand():
    # group 1: rewards 1, 0, 0, 1 -> mean 0.5, unbiased std sqrt(1/3)
    adv = compute_advantages("grpo", torch.tensor([1.0, 0.0, 0.0, 1.0, 2.0, 2.0, 2.0, 2.0]), group_size=4)
    s = math.sqrt(1 / 3)
    expected = [0.5 / (s + 1e-6), -0.5 / (s + 1e-6), -0.5 / (s + 1e-6), 0.5 / (s + 1e-6), 0, 0, 0, 0]
    assert torch.allclose(adv, torch.tensor(expected), atol=1e-5)


def test_identical_rewards_get_zero_advantage_in_every_estimator():
    rewards = torch.tensor([0.7] * 4)
    for name in ("grpo", "dr_grpo", "rloo", "reinforce_pp"):
        assert torch.allclose(compute_advantages(name, rewards, group_size=4), torch.zeros(4), atol=1e-6), name


def test_dr_grpo_and_rloo_by_hand():
    rewards = torch.tensor([1.0, 0.0, 0.0])
    assert torch.allclose(compute_advantages("dr_grpo", rewards, 3), torch.tensor([2 / 3, -1 / 3, -1 / 3]))
    # rloo: 1 - mean(0, 0) = 1; 0 - mean(1, 0) = -0.5
    assert torch.allclose(compute_advantages("rloo", rewards, 3), torch.tensor([1.0, -0.5, -0.5]))


def test_reinforce_pp_is_batch_whitened():
    adv = compute_advantages("reinforce_pp", torch.tensor([1.0, 0.0, 3.0, 1.0]), group_size=2)
    # group-centred: 0.5, -0.5, 1, -1 ; mean 0 ; unbiased std sqrt(2.5/3)
    std = math.sqrt((0.25 + 0.25 + 1 + 1) / 3)
    assert torch.allclose(adv, torch.tensor([0.5, -0.5, 1.0, -1.0]) / (std + 1e-6), atol=1e-5)


def test_bad_shapes_and_names():
    with pytest.raises(ValueError, match="groups of 3"):
        compute_advantages("grpo", torch.zeros(4), group_size=3)
    with pytest.raises(UserError, match="unknown advantage estimator 'ppo'; known: ") as refused:
        compute_advantages("ppo", torch.zeros(4), group_size=2)
    # Every built-in is listed; a plugin loaded earlier in this process may be listed beside them.
    known = set(str(refused.value).split("known: ")[1].split(", "))
    assert {"dr_grpo", "grpo", "reinforce_pp", "rloo"} <= known
