"""Memory on long sequences: chunked log-probs and entropy, and activation checkpointing.

Each option must leave the numbers alone: chunked values and gradients equal the unchunked
ones, checkpointed gradients equal the kept-activation ones, on the lean pass and on the
model's own forward (a LoRA-wrapped model, which has no lean pass).
"""

import pytest
import torch
from transformers import AutoModelForCausalLM

from veriloop.core import UserError
from veriloop.rollout import LeanDecoder
from veriloop.training._batch import TokenBatch, completion_logprobs, enable_activation_checkpointing


def _batch() -> TokenBatch:
    """Six right-padded rows over two shared prompts, completions of different lengths."""
    generator = torch.Generator().manual_seed(3)
    prompts = [torch.randint(0, 300, (9,), generator=generator), torch.randint(0, 300, (5,), generator=generator)]
    completion_lengths = [11, 4, 7, 1, 11, 6]
    width = 9 + max(completion_lengths)
    rows = len(completion_lengths)
    input_ids = torch.zeros((rows, width), dtype=torch.long)
    attention = torch.zeros((rows, width), dtype=torch.long)
    completions = torch.zeros((rows, max(completion_lengths)), dtype=torch.long)
    mask = torch.zeros((rows, max(completion_lengths)))
    prompt_lengths = torch.zeros(rows, dtype=torch.long)
    for row, length in enumerate(completion_lengths):
        prompt = prompts[row % 2]
        completion = torch.randint(0, 300, (length,), generator=generator)
        sequence = torch.cat([prompt, completion])
        input_ids[row, : len(sequence)], attention[row, : len(sequence)] = sequence, 1
        completions[row, :length], mask[row, :length] = completion, 1.0
        prompt_lengths[row] = len(prompt)
    owners = torch.arange(rows)  # one row per trajectory
    return TokenBatch(input_ids, attention, prompt_lengths, completions, mask, torch.zeros_like(mask), owners)


def _values_and_grads(model, batch, lean, **options):
    model.zero_grad(set_to_none=True)
    logprobs, entropy = completion_logprobs(model, batch, 0.7, with_entropy=True, lean=lean, **options)
    ((logprobs * 1.5 + entropy) * batch.loss_mask).sum().backward()
    grads = [p.grad.clone() if p.grad is not None else None for p in model.parameters()]
    return logprobs * batch.loss_mask, entropy * batch.loss_mask, grads


def _assert_same(first, second, tolerance):
    (logprobs, entropy, grads), (other_logprobs, other_entropy, other_grads) = first, second
    assert (logprobs - other_logprobs).abs().max() <= tolerance
    assert (entropy - other_entropy).abs().max() <= tolerance
    assert sum(g is not None for g in grads) > 0
    for grad, other in zip(grads, other_grads):
        assert (grad is None) == (other is None)
        if grad is not None:
            assert (grad - other).abs().max() <= tolerance * max(1.0, float(other.abs().max()))


@pytest.fixture
def tiny_model(tiny_model_dir):
    return AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float64)


@pytest.fixture
def lora_model(tiny_model_dir):
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float64)
    config = LoraConfig(r=2, target_modules="all-linear", task_type="CAUSAL_LM", init_lora_weights=False)
    return get_peft_model(model, config)


@pytest.mark.e2e
@pytest.mark.parametrize("chunk_tokens", [1, 3, 4, 64])
def test_chunked_lean_logprobs_equal_the_unchunked_pass(tiny_model, chunk_tokens):
    lean, batch = LeanDecoder(tiny_model), _batch()
    whole = _values_and_grads(tiny_model, batch, lean, chunk_tokens=0)
    chunked = _values_and_grads(tiny_model, batch, lean, chunk_tokens=chunk_tokens)
    _assert_same(whole, chunked, 1e-12)


@pytest.mark.e2e
def test_chunked_logprobs_of_the_models_own_forward_equal_its_full_logits(lora_model):
    assert not LeanDecoder.supports(lora_model)
    batch = _batch()
    whole = _values_and_grads(lora_model, batch, None, chunk_tokens=0)  # the model's (B, L, V) logits
    chunked = _values_and_grads(lora_model, batch, None, chunk_tokens=3)  # its decoder, then its head per chunk
    _assert_same(whole, chunked, 1e-12)
    trained = [p.grad for p in lora_model.parameters() if p.requires_grad]
    assert trained and all(g is not None and g.abs().sum() > 0 for g in trained)


def test_chunked_logprobs_without_grad_equal_the_unchunked(tiny_model):
    lean, batch = LeanDecoder(tiny_model), _batch()
    with torch.no_grad():
        whole, _ = completion_logprobs(tiny_model, batch, 1.0, lean=lean)
        chunked, _ = completion_logprobs(tiny_model, batch, 1.0, lean=lean, chunk_tokens=2)
    assert torch.equal(whole * batch.loss_mask, chunked * batch.loss_mask)


def test_lean_activation_checkpointing_gives_the_same_gradients(tiny_model):
    lean, batch = LeanDecoder(tiny_model), _batch()
    kept = _values_and_grads(tiny_model, batch, lean, chunk_tokens=4)
    recomputed = _values_and_grads(tiny_model, batch, lean, chunk_tokens=4, checkpoint_layers=True)
    _assert_same(kept, recomputed, 0.0)


def test_activation_checkpointing_of_the_models_own_forward_gives_the_same_gradients(lora_model):
    batch = _batch()
    lora_model.train()
    kept = _values_and_grads(lora_model, batch, None, chunk_tokens=5)
    enable_activation_checkpointing(lora_model)
    assert getattr(lora_model, "is_activation_checkpointing", None) or lora_model.is_gradient_checkpointing
    recomputed = _values_and_grads(lora_model, batch, None, chunk_tokens=5)
    _assert_same(kept, recomputed, 1e-12)


def test_activation_checkpointing_needs_a_model_that_supports_it():
    class Plain(torch.nn.Module):
        pass

    with pytest.raises(UserError, match="optim.activation_checkpointing: Plain does not support"):
        enable_activation_checkpointing(Plain())


@pytest.mark.e2e
def test_training_with_both_options_matches_training_without(make_config, digit_tasks):
    from veriloop.training import RLTrainer

    steps = []
    for name, optim in (
        ("plain", {"logprob_chunk_tokens": 0}),
        ("lean", {"logprob_chunk_tokens": 2, "activation_checkpointing": True}),
    ):
        config = make_config(
            name=name, rollout={"prompts_per_step": 2, "group_size": 4}, algorithm={"entropy_coef": 0.01}, optim=optim
        )
        trainer = RLTrainer(config, tasks=digit_tasks)
        try:
            steps.append(trainer.step())
        finally:
            trainer.close()
    plain, lean = steps
    assert plain["grad_norm"] > 0
    for key in ("policy_loss", "entropy", "grad_norm"):
        assert abs(plain[key] - lean[key]) <= 1e-5 * max(1.0, abs(plain[key])), key


@pytest.mark.parametrize("model_fixture", ["tiny_model", "lora_model"])
def test_chunked_sft_loss_equals_the_unchunked_loss_and_gradients(model_fixture, request):
    from veriloop.training import sft_loss

    model = request.getfixturevalue(model_fixture)
    lean = LeanDecoder(model) if LeanDecoder.supports(model) else None
    batch = _batch()
    conversations = [
        (row[row_mask].tolist(), [0] * int(length) + [1] * (int(row_mask.sum()) - int(length)))
        for row, row_mask, length in zip(batch.input_ids, batch.attention_mask.bool(), batch.prompt_lengths)
    ]
    results = []
    for chunk_tokens in (0, 4):
        model.zero_grad(set_to_none=True)
        loss, tokens = sft_loss(model, conversations, 0, lean, chunk_tokens=chunk_tokens)
        loss.backward()
        results.append((loss.detach(), tokens, [p.grad.clone() for p in model.parameters() if p.grad is not None]))
    (whole, whole_tokens, whole_grads), (chunked, chunked_tokens, chunked_grads) = results
    assert whole_tokens == chunked_tokens == int(batch.loss_mask.sum())
    assert abs(float(whole - chunked)) <= 1e-12 and len(whole_grads) == len(chunked_grads) > 0
    for grad, other in zip(whole_grads, chunked_grads):
        assert (grad - other).abs().max() <= 1e-12 * max(1.0, float(grad.abs().max()))
