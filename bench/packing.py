"""Sequence packing against padded micro-batches: the RL step's training passes, side by side.

One batch of multi-turn tool episodes, shaped like the seed loop's: ``--prompts`` prompts of 60
to 200 tokens, ``--group-size`` episodes each, an episode one to four turns of a 16-160 token
answer, each but the last followed by a 40-320 token tool reply (masked out of the loss). Token
ids are drawn at random: the passes' cost depends on the lengths, not on the text. The model is
SmolLM2-135M-Instruct (``veriloop model fetch``, from the content-checked cache when it holds it),
or the tiny test model with ``--tiny``.

Each side runs in its own child process (so that its peak resident memory, ``ru_maxrss``, is its
own): an ``RLTrainer`` on the model, then one warm-up update on two rows, then the timed part,
what a step of the trainer runs after sampling: the recompute pass (``algorithm.recompute_logprobs``,
without grad) and the update (``_update``: forward with entropy, backward, AdamW step) over the
whole batch. ``padded``: ``optim.micro_batch_size`` rows per pass, padded to the longest;
``packed``: ``optim.max_tokens_per_micro_batch`` tokens per pass, without padding. Both in
bfloat16 autocast, as the SmolLM2 recipe trains, with activation checkpointing (without it the
padded side of this batch needs more memory than a 23 GB machine shared with other jobs has).
The sides alternate ``--repeats`` times; the fastest run of each counts (wall times on a shared
machine swing by several times; ``*_cpu_s`` is the process's CPU time in that run). The last
line printed is JSON.

``--model-dir`` runs any local model directory instead, and ``--device cuda`` runs both sides on
the GPU, adding each side's peak GPU memory (``torch.cuda.max_memory_allocated`` over the timed
part: model, AdamW state and the passes' activations); ``bench/gpu_check.py`` runs it so.

    .venv/bin/python bench/packing.py [--tiny] [--prompts 2] [--group-size 8] [--micro-batch-size 4] [--max-tokens 4096]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def episodes(prompts: int, group_size: int, seed: int = 0) -> list[tuple[int, list[tuple[int, bool]]]]:
    """Per episode: its prompt's length and its completion as (tokens, trained) spans."""
    draw = random.Random(seed)
    rows = []
    for _ in range(prompts):
        prompt = draw.randint(60, 200)
        for _ in range(group_size):
            turns = draw.randint(1, 4)
            spans = []
            for turn in range(turns):
                spans.append((draw.randint(16, 160), True))
                if turn < turns - 1:
                    spans.append((draw.randint(40, 320), False))
            rows.append((prompt, spans))
    return rows


def token_batch_of(rows: list[tuple[int, list[tuple[int, bool]]]], group_size: int, vocab: int):
    """The trainer's right-padded ``TokenBatch`` of ``rows``; a group's rows share their prompt's ids."""
    import torch

    from veriloop.training._batch import TokenBatch

    generator = torch.Generator().manual_seed(1)
    prompts: dict[int, torch.Tensor] = {}  # group -> its prompt's ids
    completions = [sum(n for n, _ in spans) for _, spans in rows]
    width, columns = max(p + c for (p, _), c in zip(rows, completions)), max(completions)
    input_ids = torch.zeros((len(rows), width), dtype=torch.long)
    attention = torch.zeros_like(input_ids)
    completion_ids = torch.zeros((len(rows), columns), dtype=torch.long)
    mask = torch.zeros((len(rows), columns))
    for row, ((prompt_length, spans), length) in enumerate(zip(rows, completions)):
        if row // group_size not in prompts:
            prompts[row // group_size] = torch.randint(0, vocab, (prompt_length,), generator=generator)
        prompt = prompts[row // group_size]
        completion = torch.randint(0, vocab, (length,), generator=generator)
        input_ids[row, : prompt_length + length] = torch.cat([prompt, completion])
        attention[row, : prompt_length + length] = 1
        completion_ids[row, :length] = completion
        mask[row, :length] = torch.tensor([float(trained) for n, trained in spans for _ in range(n)])
    prompt_lengths = torch.tensor([p for p, _ in rows])
    sampler = -torch.rand(mask.shape, generator=generator) - 2.0
    return TokenBatch(input_ids, attention, prompt_lengths, completion_ids, mask, sampler, torch.arange(len(rows)))


def model_dir(args: argparse.Namespace, out: Path) -> Path:
    """The model both sides load: ``--model-dir``, or one written under ``out`` (a directory the caller removes)."""
    if args.model_dir:
        return args.model_dir
    if args.tiny:
        from veriloop.training import init_tiny_model

        return init_tiny_model(out / "tiny")
    from veriloop.training import fetch_model

    return Path(fetch_model("smollm2-135m-instruct", out / "smollm2").model.path)


def child(args: argparse.Namespace) -> dict[str, float]:
    """One side: the recompute pass and one update over the batch; seconds and peak RSS."""
    import torch

    from veriloop.core import Task
    from veriloop.training import RLTrainer, TrainConfig
    from veriloop.training._objective import LossInputs, loss_inputs

    torch.set_num_threads(args.threads)
    optim = {
        "micro_batch_size": args.micro_batch_size,
        "autocast": "bfloat16",
        "activation_checkpointing": True,
        "lr": 1e-6,
        "warmup_steps": 0,
    }
    if args.side == "packed":
        optim = {**optim, "micro_batch_size": 1024, "max_tokens_per_micro_batch": args.max_tokens}
    config = TrainConfig.model_validate(
        {
            "model": {"path": args.model, "device": args.device},
            "algorithm": {"recompute_logprobs": True, "entropy_coef": 0.001, "beta": 0.0},
            "optim": optim,
            "run": {"out": args.out, "loggers": [], "progress": False},
        }
    )
    tasks = [Task(id="t", domain="format", prompt="Say a digit.", verifier={"kind": "regex", "pattern": r"\d"})]
    trainer = RLTrainer(config, tasks=tasks)
    rows = episodes(args.prompts, args.group_size)
    batch = token_batch_of(rows, args.group_size, trainer.model.config.vocab_size)
    advantages = torch.randn(len(batch), generator=torch.Generator().manual_seed(2))
    warm_up = batch.select(slice(0, 2))
    trainer._update(LossInputs(warm_up, warm_up.sampler_logprobs, advantages[:2]))
    gpu = args.device.startswith("cuda")
    if gpu:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    started, cpu_started = time.perf_counter(), time.process_time()
    algo = trainer.config.algorithm
    recompute = lambda: trainer._recomputed(batch)  # noqa: E731
    inputs, _ = loss_inputs(batch, advantages, None, False, algo, recompute, trainer.ranks)
    trainer._update(inputs)
    if gpu:
        torch.cuda.synchronize()  # the last optimizer step's kernels are still queued
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    trainer.close()
    figures = {
        "step_s": seconds,
        "cpu_s": cpu_seconds,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,  # kB on Linux
        "rows": len(batch),
        "tokens": int(batch.attention_mask.sum()),
    }
    if gpu:
        figures["peak_gpu_memory_gb"] = torch.cuda.max_memory_allocated() / 2**30
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tiny", action="store_true", help="the tiny test model instead of SmolLM2-135M-Instruct")
    parser.add_argument("--prompts", type=int, default=2)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--micro-batch-size", type=int, default=4, help="rows per padded pass")
    parser.add_argument("--max-tokens", type=int, default=4096, help="tokens per packed pass")
    parser.add_argument("--model-dir", type=Path, help="a local model directory (instead of SmolLM2 or --tiny)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2, help="runs of each side, alternating; the fastest counts")
    parser.add_argument("--side", choices=["padded", "packed"], help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        print(json.dumps(child(args)))
        return
    with tempfile.TemporaryDirectory(prefix="packing-bench-") as scratch:
        runs = compare(args, model_dir(args, Path(scratch)), Path(scratch))
    report(args, runs)


def compare(args: argparse.Namespace, model: Path, scratch: Path) -> dict[str, list[dict[str, float]]]:
    """Both sides, alternating, each in a fresh process; every run's figures."""
    common = [
        f"--prompts={args.prompts}",
        f"--group-size={args.group_size}",
        f"--micro-batch-size={args.micro_batch_size}",
        f"--max-tokens={args.max_tokens}",
        f"--threads={args.threads}",
        f"--model={model}",
        f"--device={args.device}",
    ]
    runs: dict[str, list[dict[str, float]]] = {"padded": [], "packed": []}
    for _ in range(args.repeats):
        for side in runs:
            done = subprocess.run(
                [sys.executable, __file__, f"--side={side}", f"--out={scratch / side}", *common],
                check=True,
                capture_output=True,
                text=True,
            )
            runs[side].append(json.loads(done.stdout.strip().splitlines()[-1]))
    return runs


def report(args: argparse.Namespace, runs: dict[str, list[dict[str, float]]]) -> None:
    padded, packed = (min(runs[side], key=lambda run: run["step_s"]) for side in ("padded", "packed"))
    gpu_memory = {
        f"{side}_peak_gpu_memory_gb": round(max(run["peak_gpu_memory_gb"] for run in runs[side]), 2)
        for side in ("padded", "packed")
        if "peak_gpu_memory_gb" in runs[side][0]
    }
    print(
        json.dumps(
            {
                "model": args.model_dir.name if args.model_dir else "tiny" if args.tiny else "smollm2-135m-instruct",
                "device": args.device,
                "rows": padded["rows"],
                "tokens": padded["tokens"],
                "micro_batch_size": args.micro_batch_size,
                "max_tokens_per_micro_batch": args.max_tokens,
                "padded_step_s": round(padded["step_s"], 2),
                "packed_step_s": round(packed["step_s"], 2),
                "speedup": round(padded["step_s"] / packed["step_s"], 2),
                "padded_cpu_s": round(padded["cpu_s"], 2),
                "packed_cpu_s": round(packed["cpu_s"], 2),
                "padded_peak_rss_mb": round(max(run["peak_rss_mb"] for run in runs["padded"])),
                "packed_peak_rss_mb": round(max(run["peak_rss_mb"] for run in runs["packed"])),
                **gpu_memory,
                "padded_runs_s": [round(run["step_s"], 1) for run in runs["padded"]],
                "packed_runs_s": [round(run["step_s"], 1) for run in runs["packed"]],
            }
        )
    )


if __name__ == "__main__":
    main()
