"""Sampling throughput: veriloop's hf engine against transformers' generate, same model and batch.

Both sample ``batch`` continuations of exactly ``new_tokens`` tokens (end-of-sequence ignored)
at temperature 1 from the same prompts. Where vLLM is importable (``.venv-vllm``, ``make
setup-vllm``), the ``vllm`` engine (in-process, eager, float32) samples the same batch too and
adds ``vllm_tokens_per_s``. Prints one JSON line per model size.

With ``--model DIR`` (a real model, e.g. from ``veriloop model fetch smollm2-135m-instruct``),
one line for that model: ``generate`` in float32 (its default on CPU), the ``hf`` engine in
float32 and sampling from a bfloat16 snapshot (``veriloop_tokens_per_s`` is the faster), and
the machine's ceilings measured in the same run: memory bandwidth (a 512 MiB tensor copied,
bytes read plus written per second) and bfloat16 matrix-product throughput (2048^3 products),
turned into tokens/s as ``batch x bandwidth / bytes of weights read per decode step`` and
``matmul FLOP/s / (2 x parameters)`` (a decoded token's products; attention left out).

    .venv/bin/python bench/generate.py [--batch 64] [--new-tokens 64] [--repeats 3]
    .venv/bin/python bench/generate.py --model runs/smollm2/base --new-tokens 128 --repeats 2
    .venv-vllm/bin/python bench/generate.py          # with the vllm column
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import tempfile
import time
from pathlib import Path

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


def _vllm_engine(directory: str, batch: int, new_tokens: int, kv_cache_mb: int = 256, dtype: str = "float32"):
    """The vllm engine on the same model, or None where vLLM is not installed."""
    if importlib.util.find_spec("vllm") is None:
        return None
    return create_engine(
        "vllm",
        model=directory,
        max_num_seqs=batch,
        max_model_len=256 + new_tokens,
        kv_cache_bytes=kv_cache_mb * 2**20,
        dtype=dtype,
    )


def bench(name: str, spec: TinyModelSpec, batch: int, new_tokens: int, repeats: int) -> dict:
    with tempfile.TemporaryDirectory() as directory:
        init_tiny_model(directory, spec)
        engine = create_engine("hf", model=directory, max_batch_size=batch)
        vllm_engine = _vllm_engine(directory, batch, new_tokens)
        tokenizer = AutoTokenizer.from_pretrained(directory)
        model = AutoModelForCausalLM.from_pretrained(directory).eval()
    return {
        "bench": "generate",
        "model": name,
        **_compare(engine, model, tokenizer, vllm_engine, batch, new_tokens, repeats),
    }


def _compare(engine, model, tokenizer, vllm_engine, batch: int, new_tokens: int, repeats: int, more=()) -> dict:
    """Tokens/s of ``engine``, ``generate`` and vllm on one batch, plus ``more`` (name, engine) columns."""
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

    def runner(other):
        def run():
            samples = other.generate(prompt_ids, params)
            assert all(s[0].num_tokens == new_tokens for s in samples)

        return run

    extra = [runner(other) for _, other in more]
    ours_s, reference_s, *rest = _time_alternately([ours, reference, *extra] + ([vllm] if vllm_engine else []), repeats)
    tokens = batch * new_tokens
    vllm_column = {"vllm_tokens_per_s": round(tokens / rest[-1], 1)} if vllm_engine else {}
    more_columns = {f"{name}_tokens_per_s": round(tokens / seconds, 1) for (name, _), seconds in zip(more, rest)}
    return {
        "parameters": sum(p.numel() for p in model.parameters()),
        "batch": batch,
        "new_tokens": new_tokens,
        "veriloop_tokens_per_s": round(tokens / ours_s, 1),
        **more_columns,
        "transformers_generate_tokens_per_s": round(tokens / reference_s, 1),
        "speedup": round(reference_s / ours_s, 2),
        **vllm_column,
        "threads": torch.get_num_threads(),
    }


def _memory_bandwidth_gb_per_s() -> float:
    """Bytes read plus written per second copying a 512 MiB tensor (best of 5)."""
    source = torch.ones(2**27)  # 512 MiB of float32
    target = torch.empty_like(source)
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        target.copy_(source)
        best = min(best, time.perf_counter() - started)
    return 2 * source.numel() * 4 / best / 1e9


def _matmul_gflop_per_s(dtype: torch.dtype) -> float:
    """Throughput of 2048^3 matrix products in ``dtype`` (best of 5)."""
    a, b = torch.randn(2048, 2048, dtype=dtype), torch.randn(2048, 2048, dtype=dtype)
    a @ b
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - started)
    return 2 * 2048**3 / best / 1e9


def bench_model(directory: str, batch: int, new_tokens: int, repeats: int) -> dict:
    """One real model: generate (float32), the hf engine in float32 and from a bfloat16 snapshot, vllm (bfloat16)."""
    fast = create_engine("hf", model=directory, max_batch_size=batch, sample_dtype="bfloat16")
    plain = create_engine("hf", model=directory, max_batch_size=batch)
    tokenizer = AutoTokenizer.from_pretrained(directory)
    model = AutoModelForCausalLM.from_pretrained(directory).eval()
    vllm_engine = _vllm_engine(directory, batch, new_tokens, kv_cache_mb=1024, dtype="bfloat16")
    row = _compare(fast, model, tokenizer, vllm_engine, batch, new_tokens, repeats, more=[("veriloop_float32", plain)])
    parameters = row["parameters"]
    bandwidth = _memory_bandwidth_gb_per_s()
    bf16_gflops = _matmul_gflop_per_s(torch.bfloat16)
    bandwidth_ceiling = batch * bandwidth * 1e9 / (2 * parameters)  # bfloat16 weights read once per step
    compute_ceiling = bf16_gflops * 1e9 / (2 * parameters)
    best = max(row["veriloop_tokens_per_s"], row["veriloop_float32_tokens_per_s"])
    return {
        "bench": "generate",
        "model": Path(directory).name,
        **row,
        "speedup": round(best / row["transformers_generate_tokens_per_s"], 2),
        "memory_bandwidth_gb_per_s": round(bandwidth, 1),
        "bfloat16_matmul_gflop_per_s": round(bf16_gflops, 1),
        "bandwidth_ceiling_tokens_per_s": round(bandwidth_ceiling, 1),
        "compute_ceiling_tokens_per_s": round(compute_ceiling, 1),
        "fraction_of_bandwidth_ceiling": round(best / bandwidth_ceiling, 3),
        "fraction_of_compute_ceiling": round(best / compute_ceiling, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--model", default="", help="a model directory: one line for it instead of the tiny sizes")
    args = parser.parse_args()
    if args.model:
        print(json.dumps(bench_model(args.model, args.batch, args.new_tokens, args.repeats)), flush=True)
        return
    for name, spec in SIZES.items():
        print(json.dumps(bench(name, spec, args.batch, args.new_tokens, args.repeats)), flush=True)


if __name__ == "__main__":
    main()
