"""Sampling throughput: veriloop's hf engine against transformers' generate, same model and batch.

Both sample ``batch`` continuations of exactly ``new_tokens`` tokens (end-of-sequence ignored)
at temperature 1 from the same prompts. Where vLLM is importable (``.venv-vllm``, ``make
setup-vllm``), the ``vllm`` engine (in-process, eager, float32) samples the same batch too and
adds ``vllm_tokens_per_s``. Prints one JSON line per model size.

    .venv/bin/python bench/generate.py [--batch 64] [--new-tokens 64] [--repeats 3]
    .venv-vllm/bin/python bench/generate.py          # with the vllm column
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import tempfile
import time

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from veriloop.rollout import SamplingParams, create_engine
from veriloop.training import TinyModelSpec, init_tiny_model

SIZES = {
    "tiny-1M": TinyModelSpec(),
    "small-20M": TinyModelSpec(hidden_size=384, num_layers=8, num_heads=6, num_kv_heads=2, intermediate_size=1536),
}


def _time_alternately(fns, repeats: int) -> list[float]:
    """Median seconds of each, run alternately so that background load hits them alike."""
    for fn in fns:  # warm-up
        fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, bucket in zip(fns, times):
            started = time.perf_counter()
            fn()
            bucket.append(time.perf_counter() - started)
    return [statistics.median(bucket) for bucket in times]


def _vllm_engine(directory: str, batch: int, new_tokens: int):
    """The vllm engine on the same model, or None where vLLM is not installed."""
    if importlib.util.find_spec("vllm") is None:
        return None
    return create_engine(
        "vllm", model=directory, max_num_seqs=batch, max_model_len=256 + new_tokens, kv_cache_bytes=256 * 2**20
    )


def bench(name: str, spec: TinyModelSpec, batch: int, new_tokens: int, repeats: int) -> dict:
    with tempfile.TemporaryDirectory() as directory:
        init_tiny_model(directory, spec)
        engine = create_engine("hf", model=directory, max_batch_size=batch)
        vllm_engine = _vllm_engine(directory, batch, new_tokens)
        tokenizer = AutoTokenizer.from_pretrained(directory)
        model = AutoModelForCausalLM.from_pretrained(directory).eval()
    prompts = [[{"role": "user", "content": f"What is {i} + {2 * i}?"}] for i in range(batch)]
    prompt_ids = [engine.encode_prompt(p) for p in prompts]
    params = SamplingParams(max_tokens=new_tokens, temperature=1.0, seed=0, ignore_eos=True)

    def ours():
        samples = engine.generate(prompt_ids, params)
        assert all(s[0].num_tokens == new_tokens for s in samples)

    tokenizer.padding_side = "left"
    encoded = tokenizer.pad({"input_ids": prompt_ids}, return_tensors="pt")

    def reference():
        with torch.inference_mode():
            out = model.generate(
                **encoded,
                do_sample=True,
                temperature=1.0,
                top_p=1.0,
                top_k=0,
                max_new_tokens=new_tokens,
                min_new_tokens=new_tokens,
                pad_token_id=tokenizer.pad_token_id,
            )
        assert out.shape[1] - encoded["input_ids"].shape[1] == new_tokens

    def vllm():
        samples = vllm_engine.generate(prompt_ids, params)
        assert all(s[0].num_tokens == new_tokens for s in samples)

    ours_s, reference_s, *vllm_s = _time_alternately([ours, reference] + ([vllm] if vllm_engine else []), repeats)
    tokens = batch * new_tokens
    vllm_column = {"vllm_tokens_per_s": round(tokens / vllm_s[0], 1)} if vllm_s else {}
    return {
        "bench": "generate",
        "model": name,
        "parameters": sum(p.numel() for p in model.parameters()),
        "batch": batch,
        "new_tokens": new_tokens,
        "veriloop_tokens_per_s": round(tokens / ours_s, 1),
        "transformers_generate_tokens_per_s": round(tokens / reference_s, 1),
        "speedup": round(reference_s / ours_s, 2),
        **vllm_column,
        "threads": torch.get_num_threads(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    for name, spec in SIZES.items():
        print(json.dumps(bench(name, spec, args.batch, args.new_tokens, args.repeats)), flush=True)


if __name__ == "__main__":
    main()
