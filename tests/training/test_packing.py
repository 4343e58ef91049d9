"""Sequence packing (``optim.max_tokens_per_micro_batch``): micro-batches filled by token budget
and run without padding must give the padded computation's log-probs, entropies, losses and
gradients, on the lean pass and on the model's own forward, over rows of very different lengths
(multi-turn rows whose tool turns are masked out of the loss included)."""

import pytest
import torch
from transformers import AutoModelForCausalLM

from veriloop.rollout import LeanDecoder
from veriloop.training._batch import (
    TokenBatch,
    completion_logprobs,
    logprobs_without_grad,
    token_budget_micro_batches,
)

# (prompt index, completion length, masked spans): a masked span is a tool's reply inside the completion.
_ROWS = [(0, 3, []), (0, 41, [(5, 17), (25, 33)]), (1, 1, []), (1, 23, [(4, 15)]), (2, 60, [(10, 30), (40, 52)])]


def _multi_turn_batch() -> TokenBatch:
    """Five right-padded rows over three prompts (lengths 9, 2, 14), completions of 1 to 60 tokens."""
    generator = torch.Generator().manual_seed(7)
    prompts = [torch.randint(1, 300, (n,), generator=generator) for n in (9, 2, 14)]
    width = max(len(prompts[p]) + n for p, n, _ in _ROWS)
    columns = max(n for _, n, _ in _ROWS)
    input_ids = torch.zeros((len(_ROWS), width), dtype=torch.long)
    attention = torch.zeros((len(_ROWS), width), dtype=torch.long)
    completions = torch.zeros((len(_ROWS), columns), dtype=torch.long)
    mask = torch.zeros((len(_ROWS), columns))
    prompt_lengths = torch.zeros(len(_ROWS), dtype=torch.long)
    for row, (prompt, length, tool_spans) in enumerate(_ROWS):
        completion = torch.randint(1, 300, (length,), generator=generator)
        sequence = torch.cat([prompts[prompt], completion])
        input_ids[row, : len(sequence)], attention[row, : len(sequence)] = sequence, 1
        completions[row, :length], mask[row, :length] = completion, 1.0
        for start, stop in tool_spans:
            mask[row, start:stop] = 0.0
        prompt_lengths[row] = len(prompts[prompt])
    return TokenBatch(
        input_ids, attention, prompt_lengths, completions, mask, torch.zeros_like(mask), torch.arange(len(_ROWS))
    )


def test_token_budget_micro_batches_fill_up_to_the_budget_in_order():
    assert token_budget_micro_batches([3, 5, 2, 9, 1, 1], max_rows=8, max_tokens=8) == [
        slice(0, 2),  # 3 + 5 = 8
        slice(2, 3),  # 2 + 9 > 8
        slice(3, 4),  # 9 > 8: alone
        slice(4, 6),
    ]
    assert token_budget_micro_batches([1, 1, 1, 1, 1], max_rows=2, max_tokens=100) == [
        slice(0, 2),
        slice(2, 4),
        slice(4, 5),
    ]
    assert token_budget_micro_batches([], max_rows=2, max_tokens=100) == []


@pytest.fixture
def double_model(tiny_model_dir):
    return AutoModelForCausalLM.from_pretrained(tiny_model_dir).double()


def _values_and_grads(model, batch, lean, **options):
    model.zero_grad(set_to_none=True)
    logprobs, entropy = completion_logprobs(model, batch, 0.7, with_entropy=True, lean=lean, **options)
    ((logprobs * 1.5 + entropy) * batch.loss_mask).sum().backward()
    return logprobs * batch.loss_mask, entropy * batch.loss_mask, [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("pass_", ["lean", "model"])
@pytest.mark.parametrize("chunk_tokens", [0, 16])
def test_packed_logprobs_and_gradients_equal_the_padded_ones(double_model, pass_, chunk_tokens):
    batch = _multi_turn_batch()
    lean = LeanDecoder(double_model) if pass_ == "lean" else None
    padded = _values_and_grads(double_model, batch, lean, chunk_tokens=chunk_tokens)
    packed = _values_and_grads(double_model, batch, lean, chunk_tokens=chunk_tokens, packed=True)
    # float64: a token that saw another row, a shifted position or a misplaced value is O(1) off.
    for expected, got in zip(padded[:2], packed[:2]):
        assert torch.allclose(got, expected, atol=1e-9)
    for expected, got in zip(padded[2], packed[2]):
        assert (got - expected).abs().max() <= 1e-9 * max(1.0, float(expected.abs().max()))


def test_packed_reference_and_recompute_passes_equal_the_padded_ones(double_model):
    """The passes without grad, micro-batched by rows or by a 40-token budget (two rows alone)."""
    batch = _multi_turn_batch()
    for lean in (LeanDecoder(double_model), None):
        padded = logprobs_without_grad(double_model, batch, 0.7, micro_batch_size=2, lean=lean)
        packed = logprobs_without_grad(double_model, batch, 0.7, micro_batch_size=8, lean=lean, max_tokens=40)
        assert torch.allclose(packed * batch.loss_mask, padded * batch.loss_mask, atol=1e-9)


def test_packed_gradient_accumulation_weights_tokens_as_the_padded_batch(make_config, digit_tasks):
    """One padded micro-batch of every row, or packed micro-batches of at most 40 tokens (the
    60-token row alone): the same accumulated gradient and loss statistics, per aggregation."""
    from veriloop.training import RLTrainer
    from veriloop.training._objective import LossInputs

    batch = _multi_turn_batch()
    advantages = torch.tensor([1.0, -0.5, 0.25, 2.0, -1.0])
    old_logprobs = -torch.rand(batch.loss_mask.shape, generator=torch.Generator().manual_seed(1)) - 4.0
    for aggregation in ("token-mean", "seq-mean-token-mean"):
        results = []
        for optim in ({"micro_batch_size": 8}, {"micro_batch_size": 8, "max_tokens_per_micro_batch": 40}):
            config = make_config(
                name=f"{aggregation}-{len(optim)}",
                optim={"max_grad_norm": 1e9, **optim},
                algorithm={"aggregation": aggregation},
            )
            trainer = RLTrainer(config, tasks=digit_tasks)
            stats = trainer._update(LossInputs(batch, old_logprobs, advantages))
            trainer.close()
            grads = {n: p.grad.clone() for n, p in trainer.model.named_parameters() if p.grad is not None}
            results.append((stats, grads))
        (padded_stats, padded), (packed_stats, packed) = results
        assert padded.keys() == packed.keys() and padded
        for key in padded:
            assert torch.allclose(packed[key], padded[key], rtol=1e-4, atol=1e-7), (aggregation, key)
        assert packed_stats["policy_loss"] == pytest.approx(padded_stats["policy_loss"], rel=1e-5, abs=1e-7)
