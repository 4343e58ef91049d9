"""One GPU RL step on a Qwen2-0.5B-shaped random model in bf16: generation tokens/s and training MFU.

The model has Qwen2-0.5B's shape (hidden 896, 24 layers, 14 heads, 2 KV heads, MLP 4864,
vocabulary 151,936, tied embeddings: 494M parameters) and random weights; the tokenizer is
the locally built tiny one (ids past its vocabulary decode to nothing). Nothing is downloaded.
``--steps`` GRPO steps of ``--prompts`` x ``--group-size`` samples of up to ``--new-tokens``
tokens; the figures are those of the last step (the first ones warm up kernels and the
allocator). MFU counts 6 x parameters x tokens the training pass computes (each distinct prompt
once, every completion token) plus the attention matmuls, against ``--peak-tflops``
(H100/H200 dense bf16: 989). Prints one JSON line.

    .venv/bin/python bench/gpu_step.py                       # on a CUDA machine
    .venv/bin/python bench/gpu_step.py --device cpu --shape tiny --steps 2   # the same path on CPU

``--model-dir`` trains a model directory built beforehand instead (``bench/gpu_check.py`` builds
the shape once for all its parts).

On a machine whose Python already has torch and transformers but nothing else of ours and no
network, veriloop needs only pydantic besides: download its wheels elsewhere (2.8 MB,
``pip download pydantic -d wheels --only-binary=:all: --python-version 3.12 --platform
manylinux2014_x86_64``), then ``pip install --no-index wheels/*.whl`` and
``PYTHONPATH=src python3 bench/gpu_step.py``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch

SHAPES = {
    "qwen2-0.5b": {
        "hidden_size": 896,
        "num_hidden_layers": 24,
        "num_attention_heads": 14,
        "num_key_value_heads": 2,
        "intermediate_size": 4864,
        "vocab_size": 151936,
    },
    "tiny": {
        "hidden_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 256,
        "vocab_size": 1024,
    },
}


def build_model(out: Path, shape: dict) -> Path:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from veriloop.rollout._hf import quiet_transformers
    from veriloop.training import TinyModelSpec
    from veriloop.training._tiny_model import build_tokenizer

    quiet_transformers()
    tokenizer = build_tokenizer(TinyModelSpec(vocab_size=512))
    torch.manual_seed(0)
    config = Qwen2Config(
        **shape,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    Qwen2ForCausalLM(config).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def bench_tasks() -> list:
    """256 prompts asking for a long story (every sample runs to ``max_tokens``); a digit scores 1."""
    from veriloop.core import Task

    return [
        Task(
            id=f"t{i}",
            domain="bench",
            prompt=f"Write a long story about the number {i}.",
            verifier={"kind": "regex", "pattern": r"\d", "mode": "search"},
        )
        for i in range(256)
    ]


def training_flops(model, batch) -> tuple[float, int]:
    """FLOPs of one forward+backward of the shared-prompt training pass, and its token count."""
    from veriloop.training._batch import _shared_prompts

    prefix_ids, prefix_lengths, _, suffix_ids, suffix_lengths = _shared_prompts(batch, "cpu")
    config = model.config
    tokens = int(prefix_ids.numel() + suffix_ids.numel())  # padded, as computed
    parameters = sum(p.numel() for p in model.parameters())
    head_dim = config.hidden_size // config.num_attention_heads
    # Attention scores and values: 2 matmuls of 2 * heads * head_dim FLOPs per query-key pair.
    pairs = prefix_ids.shape[0] * prefix_ids.shape[1] ** 2 + suffix_ids.shape[0] * suffix_ids.shape[1] * (
        prefix_ids.shape[1] + suffix_ids.shape[1]
    )
    attention = 4 * config.num_attention_heads * head_dim * pairs * config.num_hidden_layers
    return 3 * (2 * parameters * tokens + attention), tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="qwen2-0.5b")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=512)
    parser.add_argument("--micro-batch-size", type=int, default=32)
    parser.add_argument("--peak-tflops", type=float, default=989.0, help="the device's dense bf16 peak")
    parser.add_argument("--model-dir", type=Path, help="a model directory to train (default: build --shape's)")
    args = parser.parse_args()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(
            json.dumps(
                {"bench": "gpu_step", "skipped": "no CUDA device (use --device cpu to run the same path on CPU)"}
            )
        )
        return

    from veriloop.training import RLTrainer, TrainConfig

    with tempfile.TemporaryDirectory() as root:
        model_dir = args.model_dir or build_model(Path(root) / "model", SHAPES[args.shape])
        config = TrainConfig.model_validate(
            {
                "model": {"path": str(model_dir), "device": args.device},
                "rollout": {
                    "prompts_per_step": args.prompts,
                    "group_size": args.group_size,
                    "max_tokens": args.new_tokens,
                    "max_batch_size": args.prompts * args.group_size,
                    "concurrency": args.prompts * args.group_size,  # every sample of a step in one batch
                },
                "algorithm": {"dynamic_sampling": False},
                "optim": {"lr": 1e-6, "warmup_steps": 0, "micro_batch_size": args.micro_batch_size},
                "run": {
                    "steps": args.steps,
                    "out": str(Path(root) / "run"),
                    "checkpoint_every": 0,
                    "save_trajectories": False,
                    "loggers": ["jsonl"],
                    "progress": False,
                },
            }
        )
        trainer = RLTrainer(config, tasks=bench_tasks())
        batches = []
        update = trainer._update
        trainer._update = lambda inputs, *rest: (batches.append(inputs.batch), update(inputs, *rest))[1]
        for _ in range(args.steps):
            started = time.perf_counter()
            metrics = trainer.step()
            step_s = time.perf_counter() - started
        flops, tokens = training_flops(trainer.model, batches[-1])
        update_s = metrics["time/update_s"]
        result = {
            "bench": "gpu_step",
            "device": torch.cuda.get_device_name() if args.device.startswith("cuda") else args.device,
            "shape": args.shape,
            "parameters_m": round(sum(p.numel() for p in trainer.model.parameters()) / 1e6, 1),
            "dtype": str(next(trainer.model.parameters()).dtype),
            "samples": args.prompts * args.group_size,
            "new_tokens": args.new_tokens,
            "step_s": round(step_s, 3),
            "rollout_s": round(metrics["time/rollout_s"], 3),
            "generation_tokens_per_s": round(metrics["rollout_tokens_per_s"], 1),
            "update_s": round(update_s, 3),
            "training_tokens": tokens,
            "training_tflops_per_s": float(f"{flops / update_s / 1e12:.3g}"),
            "mfu": float(f"{flops / update_s / (args.peak_tflops * 1e12):.3g}"),
        }
        if args.device.startswith("cuda"):
            result["peak_memory_gb"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
        trainer.close()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
