"""Peak memory of one training pass on long sequences: chunked log-probs, activation checkpointing.

One micro-batch of ``--rows`` sequences of ``--tokens`` tokens (a group sharing one prompt of
``--prompt-tokens``, as GRPO trains it; the rest is completion) goes through the trainer's
log-prob pass with entropy (``completion_logprobs`` over the lean forward) and its backward,
on two model shapes built locally with random weights:

- ``tiny``: the tiny model of the tests and the quickstart (vocabulary 320, hidden 128, 4 layers);
- ``wide``: vocabulary 16,384, hidden 256, 2 layers (a real tokenizer's vocabulary is where
  the (B, T, V) logits dominate a pass's memory).

Each shape runs under four settings, each in its own child process so that one setting's
peak cannot hide another's: ``before`` (the whole completion's logits at once, activations
kept: the pass as it was), ``chunked`` (``optim.logprob_chunk_tokens``), ``checkpointed``
(``optim.activation_checkpointing``) and ``after`` (both). A child reports the peak resident
memory of its process (``ru_maxrss``), its resident memory just before the pass (model, batch
and libraries) and the difference, the pass's own peak; and the pass's wall time. On CUDA it
reports torch's allocator peak instead. The last line printed is a JSON object: per shape and
setting those figures, and per shape ``after_over_before`` (the ratio of the passes' peaks).

    .venv/bin/python bench/long_sequences.py [--rows 8] [--tokens 4096] [--shapes tiny wide]

The whole run took 33 minutes on two cores shared with other jobs (peaks need up to 14 GB of
memory on the wide shape before the change). Memory figures barely move with load; times do.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

SHAPES = {
    "tiny": {"vocab_size": 320, "hidden_size": 128, "num_layers": 4, "num_heads": 4, "num_kv_heads": 2, "mlp": 512},
    "wide": {"vocab_size": 16384, "hidden_size": 256, "num_layers": 2, "num_heads": 4, "num_kv_heads": 2, "mlp": 704},
}
SETTINGS = {
    "before": {"chunk_tokens": 0, "checkpoint_layers": False},
    "chunked": {"chunk_tokens": 1024, "checkpoint_layers": False},
    "checkpointed": {"chunk_tokens": 0, "checkpoint_layers": True},
    "after": {"chunk_tokens": 1024, "checkpoint_layers": True},
}


def _resident_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _model(shape: dict[str, int], positions: int):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=shape["vocab_size"],
        hidden_size=shape["hidden_size"],
        intermediate_size=shape["mlp"],
        num_hidden_layers=shape["num_layers"],
        num_attention_heads=shape["num_heads"],
        num_key_value_heads=shape["num_kv_heads"],
        max_position_embeddings=positions,
        tie_word_embeddings=False,
    )
    return Qwen2ForCausalLM(config)


def _batch(rows: int, tokens: int, prompt_tokens: int, vocab: int):
    import torch

    from veriloop.training._batch import TokenBatch

    generator = torch.Generator().manual_seed(1)
    prompt = torch.randint(0, vocab, (prompt_tokens,), generator=generator)
    completions = torch.randint(0, vocab, (rows, tokens - prompt_tokens), generator=generator)
    input_ids = torch.cat([prompt.expand(rows, -1), completions], dim=1)
    mask = torch.ones(completions.shape)
    return TokenBatch(
        input_ids,
        torch.ones_like(input_ids),
        torch.full((rows,), prompt_tokens),
        completions,
        mask,
        torch.zeros(completions.shape),
        torch.arange(rows),  # one row per trajectory
    )


def child(args: argparse.Namespace) -> dict[str, float]:
    """One pass (forward with entropy, backward) under one setting; its memory and time."""
    import torch

    from veriloop.rollout import LeanDecoder
    from veriloop.training._batch import completion_logprobs

    device = "cuda" if torch.cuda.is_available() else "cpu"
    shape = SHAPES[args.shape]
    model = _model(shape, args.tokens).to(device)
    batch = _batch(args.rows, args.tokens, args.prompt_tokens, shape["vocab_size"])
    lean = LeanDecoder(model)
    resident = _resident_mb()
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
        allocated = torch.cuda.memory_allocated() / 2**20
    started = time.perf_counter()
    logprobs, entropy = completion_logprobs(model, batch, 1.0, with_entropy=True, lean=lean, **SETTINGS[args.setting])
    mask = batch.loss_mask.to(device)
    ((logprobs - 0.01 * entropy) * mask).sum().div(mask.sum()).backward()
    if device == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    if device == "cuda":
        peak = torch.cuda.max_memory_allocated() / 2**20
        return {
            "device": device,
            "before_pass_mb": allocated,
            "peak_mb": peak,
            "pass_peak_mb": peak - allocated,
            "pass_s": seconds,
        }
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux
    return {
        "device": device,
        "before_pass_mb": resident,
        "peak_mb": peak,
        "pass_peak_mb": peak - resident,
        "pass_s": seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=8, help="sequences in the micro-batch")
    parser.add_argument("--tokens", type=int, default=4096, help="tokens per sequence, prompt included")
    parser.add_argument("--prompt-tokens", type=int, default=512, help="tokens of the prompt the rows share")
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument("--shape", help=argparse.SUPPRESS)
    parser.add_argument("--setting", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.shape:
        print(json.dumps(child(args)))
        return
    from rich.progress import Progress

    results: dict[str, dict[str, object]] = {}
    runs = [(shape, setting) for shape in args.shapes for setting in args.settings]
    with Progress(transient=True) as progress:
        bar = progress.add_task("passes", total=len(runs))
        for shape, setting in runs:
            progress.update(bar, description=f"{shape} / {setting}")
            command = [sys.executable, __file__, "--shape", shape, "--setting", setting]
            command += [
                "--rows",
                str(args.rows),
                "--tokens",
                str(args.tokens),
                "--prompt-tokens",
                str(args.prompt_tokens),
            ]
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise SystemExit(f"{shape} / {setting} failed:\n{done.stderr[-2000:]}")
            figures = json.loads(done.stdout.strip().splitlines()[-1])
            results.setdefault(shape, {})[setting] = {
                k: round(v, 3) if isinstance(v, float) else v for k, v in figures.items()
            }
            print(f"{shape:5} {setting:12} " + json.dumps(results[shape][setting]), file=sys.stderr, flush=True)
            progress.advance(bar)
    for by_setting in results.values():
        if "before" in by_setting and "after" in by_setting:
            ratio = by_setting["after"]["pass_peak_mb"] / by_setting["before"]["pass_peak_mb"]  # type: ignore[index]
            by_setting["after_over_before"] = round(ratio, 3)
    print(json.dumps({"rows": args.rows, "tokens": args.tokens, "prompt_tokens": args.prompt_tokens, **results}))


if __name__ == "__main__":
    main()
