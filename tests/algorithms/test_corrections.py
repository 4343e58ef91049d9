"""Mismatch corrections and their metrics against values worked out by hand."""

import math

import pytest
import torch

from veriloop.algorithms import (
    CORRECTIONS,
    CorrectionBounds,
    mismatch_correction,
    mismatch_metrics,
    mismatch_sums,
    policy_loss,
)
from veriloop.core import UnknownNameError

# Two sequences; the second has one padding position (ratio 100 there must change nothing).
RATIOS = torch.tensor([[1.0, 3.0, 0.25], [1.5, 0.8, 100.0]])
MASK = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
BOUNDS = CorrectionBounds(cap=2.0, low=0.5, high=2.0)


def _correct(mode, bounds=BOUNDS):
    behaviour = torch.zeros_like(RATIOS)
    return mismatch_correction(mode, torch.log(RATIOS), behaviour, MASK, bounds)


def test_token_tis_truncates_each_ratio_at_the_cap():
    result = _correct("token_tis")
    assert torch.allclose(result.weights * MASK, torch.tensor([[1.0, 2.0, 0.25], [1.5, 0.8, 0.0]]))
    assert result.capped[MASK.bool()].tolist() == [False, True, False, False, False]
    assert not result.masked.any()


def test_token_mask_drops_tokens_outside_the_band():
    result = _correct("token_mask")
    assert (result.weights * MASK).tolist() == [[1.0, 0.0, 0.0], [1.0, 1.0, 0.0]]
    assert result.masked[MASK.bool()].tolist() == [False, True, True, False, False]


def test_sequence_modes_use_the_geometric_mean_of_the_sequence_tokens():
    first = (1.0 * 3.0 * 0.25) ** (1 / 3)  # 0.9086: inside the band, under the cap
    second = (1.5 * 0.8) ** (1 / 2)  # 1.0954: the padding's 100 left out
    tis = _correct("sequence_tis")
    assert torch.allclose(tis.weights, torch.tensor([[first] * 3, [second] * 3]))
    capped = _correct("sequence_tis", CorrectionBounds(cap=1.05))
    assert torch.allclose(capped.weights, torch.tensor([[first] * 3, [1.05] * 3]))
    assert capped.capped.tolist() == [[False] * 3, [True] * 3]
    masked = _correct("sequence_mask", CorrectionBounds(low=0.95, high=2.0))
    assert masked.weights.tolist() == [[0.0] * 3, [1.0] * 3]
    assert masked.masked.tolist() == [[True] * 3, [False] * 3]


def test_none_weights_every_token_one():
    result = _correct("none")
    assert torch.equal(result.weights, torch.ones_like(RATIOS)) and not result.masked.any()


def test_an_unknown_correction_lists_the_known_ones():
    with pytest.raises(UnknownNameError, match="token_tis.*") as error:
        mismatch_correction("tis", torch.zeros(1, 1), torch.zeros(1, 1), torch.ones(1, 1))
    assert all(name in str(error.value) for name in CORRECTIONS.names())


def test_mismatch_metrics_by_hand():
    engine = torch.log(torch.tensor([[0.5, 0.2, 0.1], [0.4, 0.3, 0.9]]))
    trainer = torch.log(torch.tensor([[0.5, 0.35, 0.06], [0.24, 0.3, 0.1]]))
    correction = mismatch_correction("token_mask", trainer, engine, MASK, BOUNDS)
    metrics = mismatch_metrics(mismatch_sums(trainer, engine, MASK, correction))
    # Per token d = log pi_engine - log pi_trainer on the 5 unpadded tokens.
    d = [0.0, math.log(0.2 / 0.35), math.log(0.1 / 0.06), math.log(0.4 / 0.24), 0.0]
    assert metrics["mismatch/abs_logprob_diff_mean"] == pytest.approx(sum(map(abs, d)) / 5)
    assert metrics["mismatch/abs_logprob_diff_max"] == pytest.approx(math.log(0.35 / 0.2))
    assert metrics["mismatch/kl_k1"] == pytest.approx(sum(d) / 5)
    assert metrics["mismatch/kl_k3"] == pytest.approx(sum(math.exp(-x) + x - 1 for x in d) / 5)
    # rho = pi_trainer / pi_engine: 1, 1.75, 0.6, 0.6, 1 -> all inside [0.5, 2]; none masked.
    assert metrics["mismatch/masked_token_fraction"] == 0.0 and metrics["mismatch/weight_mean"] == 1.0
    tight = mismatch_correction("token_mask", trainer, engine, MASK, CorrectionBounds(low=0.7, high=1.5))
    metrics = mismatch_metrics(mismatch_sums(trainer, engine, MASK, tight))
    assert metrics["mismatch/masked_token_fraction"] == pytest.approx(3 / 5)
    assert metrics["mismatch/masked_sequence_fraction"] == 1.0
    assert metrics["mismatch/weight_mean"] == pytest.approx(2 / 5)
    capped = mismatch_correction("token_tis", trainer, engine, MASK, CorrectionBounds(cap=1.5))
    metrics = mismatch_metrics(mismatch_sums(trainer, engine, MASK, capped))
    assert metrics["mismatch/capped_token_fraction"] == pytest.approx(1 / 5)
    assert metrics["mismatch/capped_sequence_fraction"] == pytest.approx(1 / 2)
    assert metrics["mismatch/weight_mean"] == pytest.approx((1 + 1.5 + 0.6 + 0.6 + 1) / 5)


def test_weights_scale_each_token_term_and_its_gradient():
    """A dropped token adds nothing and gets no gradient; a capped one counts at the cap."""
    old = torch.zeros(1, 3)
    new = torch.log(torch.tensor([[1.1, 0.9, 1.0]])).requires_grad_()
    weights = torch.tensor([[2.0, 0.0, 0.5]])
    loss, _ = policy_loss(new, old, torch.tensor([1.0]), torch.ones(1, 3), importance_weights=weights)
    assert loss.item() == pytest.approx((-2.0 * 1.1 + 0.0 - 0.5 * 1.0) / 3)
    loss.backward()
    assert new.grad.tolist()[0] == pytest.approx([-2.0 * 1.1 / 3, 0.0, -0.5 / 3])
