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
    cache = lean.new_cache(3, 12, model.model.embed_tokens.weight)
    key_mask = attention.bool()
    with torch.no_grad():
        expected = model(input_ids=ids, attention_mask=attention, position_ids=positions).logits[:, -1]
        lean.forward(ids[:, :8], positions[:, :8], key_mask[:, :8], cache, 0)
        for slot in range(8, 12):
            last = lean.forward(ids[:, slot : slot + 1], positions[:, slot : slot + 1], key_mask[:, : slot + 1], cache, slot)
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
