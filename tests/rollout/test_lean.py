import pytest
import torch
from transformers import AutoModelForCausalLM

from veriloop.rollout import LeanDecoder, SamplingParams, create_engine


def _inputs():
    torch.manual_seed(0)
    ids = torch.randint(0, 300, (3, 12))
    attention = torch.ones(3, 12, dtype=torch.long)
    attention[0, :5] = 0  # left padding
    attention[1, :2] = 0
    return ids, attention, (attention.cumsum(-1) - 1).clamp(min=0)


def test_lean_forward_equals_the_model(tiny_model_dir):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    assert LeanDecoder.supports(model)
    lean = LeanDecoder(model)
    ids, attention, positions = _inputs()
    with torch.no_grad():
        expected = model(input_ids=ids, attention_mask=attention, position_ids=positions).logits
        plain = lean.forward(ids, positions, attention.bool())
        lean.fuse()
        fused = lean.forward(ids, positions, attention.bool())
    real = attention.bool()
    assert torch.allclose(plain[real], expected[real], atol=1e-5)
    assert torch.allclose(fused[real], expected[real], atol=1e-5)


def test_lean_cache_decoding_equals_a_full_forward(tiny_model_dir):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    lean = LeanDecoder(model)
    ids, attention, positions = _inputs()
    cache = lean.new_cache(3, 12)
    key_mask = attention.bool()
    with torch.no_grad():
        expected = model(input_ids=ids, attention_mask=attention, position_ids=positions).logits[:, -1]
        lean.forward(ids[:, :8], positions[:, :8], key_mask[:, :8], cache, 0)
        for slot in range(8, 12):
            last = lean.forward(
                ids[:, slot : slot + 1], positions[:, slot : slot + 1], key_mask[:, : slot + 1], cache, slot
            )
    assert torch.allclose(last[:, -1], expected, atol=1e-5)


def test_lean_and_plain_samplers_agree(tiny_model_dir):
    lean = create_engine("hf", model=str(tiny_model_dir))
    plain = create_engine("hf", model=str(tiny_model_dir), lean=False)
    assert lean.lean is not None and plain.lean is None
    prompts = [[{"role": "user", "content": "What is 1+2?"}], [{"role": "user", "content": "Hi"}]]
    params = SamplingParams(n=3, max_tokens=12, seed=4)
    for a, b in zip(lean.generate(prompts, params), plain.generate(prompts, params)):
        assert [s.token_ids for s in a] == [s.token_ids for s in b]
        for x, y in zip(a, b):
            assert torch.allclose(torch.tensor(x.logprobs), torch.tensor(y.logprobs), atol=1e-4)


def test_unsupported_models_fall_back(tiny_model_dir):
    from peft import LoraConfig, get_peft_model

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    wrapped = get_peft_model(model, LoraConfig(r=2, target_modules="all-linear", task_type="CAUSAL_LM"))
    assert not LeanDecoder.supports(wrapped)


def _shared_prompt_rows():
    """Five rows over two prompts of different lengths, completions of different lengths."""
    torch.manual_seed(1)
    prompts = [torch.randint(0, 300, (7,)), torch.randint(0, 300, (4,))]
    row_prefix = torch.tensor([0, 0, 1, 0, 1])
    suffix_lengths = torch.tensor([5, 2, 6, 1, 4])
    suffix_ids = torch.randint(0, 300, (5, 6))
    prefix_ids = torch.zeros(2, 7, dtype=torch.long)
    for i, prompt in enumerate(prompts):
        prefix_ids[i, : len(prompt)] = prompt
    return prompts, (prefix_ids, torch.tensor([7, 4]), row_prefix, suffix_ids, suffix_lengths)


def test_shared_prompt_forward_equals_the_model_and_its_gradients(tiny_model_dir):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float64)
    lean = LeanDecoder(model)
    prompts, args = _shared_prompt_rows()
    _, _, row_prefix, suffix_ids, suffix_lengths = args
    logits = lean.forward_prefixed(*args)  # (B, C, V)
    assert logits.shape[:2] == suffix_ids.shape
    shared_loss = sum(logits[b, : suffix_lengths[b]].logsumexp(-1).sum() for b in range(5))
    shared_grads = torch.autograd.grad(shared_loss, list(model.parameters()), allow_unused=True)
    loss = 0.0
    for b in range(5):  # each row on its own, through the model's own forward
        prompt, n = prompts[int(row_prefix[b])], int(suffix_lengths[b])
        sequence = torch.cat([prompt, suffix_ids[b, :n]])[None]
        expected = model(input_ids=sequence).logits[
            0, len(prompt) - 1 : len(prompt) - 1 + n
        ]  # predicts each suffix token
        assert torch.allclose(logits[b, :n], expected, atol=1e-9)
        loss = loss + expected.logsumexp(-1).sum()
    grads = torch.autograd.grad(loss, list(model.parameters()), allow_unused=True)
    for shared, expected in zip(shared_grads, grads):
        assert (shared is None) == (expected is None)
        if expected is not None:
            assert torch.allclose(shared, expected, rtol=1e-7, atol=1e-7)


def test_bfloat16_snapshot_samples_what_a_bfloat16_model_samples(tiny_model_dir):
    """A float32 policy sampled with sample_dtype=bfloat16 gives the tokens and log-probs of the
    same weights loaded in bfloat16, and the snapshot follows weight updates."""
    snapshot = create_engine("hf", model=str(tiny_model_dir), sample_dtype="bfloat16")
    loaded = create_engine("hf", model=str(tiny_model_dir), dtype="bfloat16")
    assert next(snapshot.model.parameters()).dtype == torch.float32
    prompts = [[{"role": "user", "content": "What is 1+2?"}], [{"role": "user", "content": "Hi"}]]
    params = SamplingParams(n=3, max_tokens=12, seed=4)
    for a, b in zip(snapshot.generate(prompts, params), loaded.generate(prompts, params)):
        assert [s.token_ids for s in a] == [s.token_ids for s in b]
        assert [s.logprobs for s in a] == [s.logprobs for s in b]
    assert snapshot.lean.dtype == torch.float32  # the snapshot lives for a batch only
    with torch.no_grad():
        for parameter in snapshot.model.parameters():
            parameter.mul_(2.0)  # exact in both precisions
        for parameter in loaded.model.parameters():
            parameter.mul_(2.0)  # exact in both precisions
    for a, b in zip(snapshot.generate(prompts, params), loaded.generate(prompts, params)):
        assert [s.logprobs for s in a] == [s.logprobs for s in b]


def test_sampling_in_another_precision_needs_the_lean_forward(tiny_model_dir):
    from veriloop.core import UserError

    with pytest.raises(UserError, match="lean forward"):
        create_engine("hf", model=str(tiny_model_dir), lean=False, sample_dtype="bfloat16")
    with pytest.raises(UserError, match="float32 or bfloat16"):
        create_engine("hf", model=str(tiny_model_dir), sample_dtype="int8")
