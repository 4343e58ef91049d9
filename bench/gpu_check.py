"""The scale-out check on a GPU machine: vLLM generation, one GRPO step's MFU, a 2-rank step.

Three parts, each in its own process with its own time limit, so that one part failing or
missing (no vLLM, one GPU) leaves the others' figures; one JSON line at the end:

- ``grpo_step``: ``bench/gpu_step.py`` on the Qwen2-0.5B-shaped model in bf16 (the ``hf``
  engine's generation tokens/s and the training pass's MFU);
- ``vllm_generate``: the ``vllm`` engine on the same shape and dtype, ``--prompts`` x
  ``--group-size`` samples of ``--new-tokens`` tokens (end-of-sequence ignored, so every sample
  is full length), and one full weight push timed; skipped with the reason when vLLM does not
  import;
- ``data_parallel``: ``torchrun --nproc-per-node 2 -m veriloop train`` (NCCL) on a tiny model
  for a few steps, when the machine has two GPUs or more; the step time of rank 0's last step.

    bash bench/gpu_check.sh                   # on a CUDA machine (installs what is missing)
    .venv/bin/python bench/gpu_check.py --device cpu --shape tiny --new-tokens 8   # the same path on CPU
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from gpu_step import SHAPES, build_model  # noqa: E402  (the bench folder is not a package)


def _last_json(text: str) -> dict:
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise ValueError("no JSON line in the output")


def _part(command: list[str], timeout_s: float, env: dict[str, str] | None = None) -> dict:
    """Run one part; its JSON line, or why there is none."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"did not finish within {timeout_s:.0f} s"}
    if done.returncode != 0:
        return {"error": f"exit code {done.returncode}: {done.stderr.strip()[-600:]}"}
    try:
        return _last_json(done.stdout)
    except ValueError as exc:
        return {"error": f"{exc}: {done.stdout.strip()[-300:]}"}


def vllm_generate(args: argparse.Namespace) -> dict:
    """This process's part: sample with the vllm engine and time it (called with --part vllm)."""
    import torch

    from veriloop.core import UserError
    from veriloop.rollout import SamplingParams, create_engine

    dtype = "bfloat16" if args.device.startswith("cuda") else "float32"
    with tempfile.TemporaryDirectory() as root:
        model_dir = build_model(Path(root) / "model", SHAPES[args.shape])
        started = time.perf_counter()
        try:
            engine = create_engine("vllm", model=str(model_dir), dtype=dtype, kv_cache_bytes=args.kv_cache_gb * 2**30)
        except UserError as exc:
            return {"bench": "vllm_generate", "skipped": str(exc)}
        start_s = time.perf_counter() - started
        prompts = [[5 + (i % 7), 9, 11 + i] for i in range(args.prompts)]
        params = SamplingParams(n=args.group_size, max_tokens=args.new_tokens, temperature=1.0, seed=0, ignore_eos=True)
        engine.generate(prompts[:1], params.model_copy(update={"n": 1, "max_tokens": 8}))  # warm-up
        started = time.perf_counter()
        samples = [s for group in engine.generate(prompts, params) for s in group]
        generate_s = time.perf_counter() - started
        tokens = sum(s.num_tokens for s in samples)
        from transformers import AutoModelForCausalLM

        state = AutoModelForCausalLM.from_pretrained(model_dir, dtype=getattr(torch, dtype)).state_dict()
        started = time.perf_counter()
        engine.update_weights(state, version=1)
        push_s = time.perf_counter() - started
        engine.close()
    return {
        "bench": "vllm_generate",
        "device": torch.cuda.get_device_name() if args.device.startswith("cuda") else args.device,
        "shape": args.shape,
        "dtype": dtype,
        "samples": len(samples),
        "generated_tokens": tokens,
        "generate_s": round(generate_s, 3),
        "generation_tokens_per_s": round(tokens / generate_s, 1),
        "engine_start_s": round(start_s, 2),
        "weight_push_s": round(push_s, 3),
    }


def data_parallel(args: argparse.Namespace, python: str) -> dict:
    """Two NCCL ranks training the quickstart-sized model a few steps through ``veriloop train``."""
    import torch

    if not args.device.startswith("cuda"):
        return {"bench": "data_parallel", "skipped": "needs CUDA devices (NCCL)"}
    if torch.cuda.device_count() < 2:
        return {"bench": "data_parallel", "skipped": f"needs two GPUs, this machine has {torch.cuda.device_count()}"}
    with tempfile.TemporaryDirectory() as root:
        from veriloop.tasks import generate_tasks
        from veriloop.training import init_tiny_model

        model_dir = init_tiny_model(Path(root) / "model")
        tasks = Path(root) / "tasks.jsonl"
        tasks.write_text("".join(t.model_dump_json() + "\n" for t in generate_tasks("arithmetic", seed=0, size=64)))
        config = {
            "model": {"path": str(model_dir), "device": "cuda"},
            "data": {"train": str(tasks)},
            "rollout": {"prompts_per_step": 8, "group_size": 4, "max_tokens": 16},
            "run": {"steps": 3, "out": str(Path(root) / "run"), "checkpoint_every": 0, "progress": False},
        }
        config_path = Path(root) / "train.json"
        config_path.write_text(json.dumps(config))
        command = [python, "-m", "torch.distributed.run", "--nproc-per-node", "2", "-m", "veriloop", "train"]
        started = time.perf_counter()
        done = subprocess.run([*command, str(config_path)], capture_output=True, text=True, timeout=args.part_timeout_s)
        wall_s = time.perf_counter() - started
        if done.returncode != 0:
            return {"bench": "data_parallel", "error": done.stderr.strip()[-600:]}
        metrics = [json.loads(line) for line in (Path(root) / "run" / "metrics.jsonl").read_text().splitlines()]
    last = metrics[-1]
    return {
        "bench": "data_parallel",
        "ranks": 2,
        "backend": "nccl",
        "steps": len(metrics),
        "wall_s": round(wall_s, 1),
        "last_step_s": round(last.get("time/step_s", float("nan")), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="qwen2-0.5b")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=512)
    parser.add_argument("--kv-cache-gb", type=float, default=16.0, help="vLLM's KV cache (use well under 1 on CPU)")
    parser.add_argument("--part-timeout-s", type=float, default=150.0, help="each part's time limit")
    parser.add_argument("--vllm-python", default=sys.executable, help="the Python whose vllm the engine uses")
    parser.add_argument("--part", choices=["vllm"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.part == "vllm":
        print(json.dumps(vllm_generate(args)))
        return
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(json.dumps({"bench": "gpu_check", "skipped": "no CUDA device (use --device cpu for the CPU path)"}))
        return
    shared = ["--device", args.device, "--shape", args.shape, "--prompts", str(args.prompts)]
    shared += ["--group-size", str(args.group_size), "--new-tokens", str(args.new_tokens)]
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    result = {
        "bench": "gpu_check",
        "device": torch.cuda.get_device_name() if args.device.startswith("cuda") else args.device,
        "gpus": torch.cuda.device_count(),
        "grpo_step": _part([sys.executable, str(BENCH / "gpu_step.py"), *shared], args.part_timeout_s),
        "vllm_generate": _part(
            [args.vllm_python, __file__, *shared, "--kv-cache-gb", str(args.kv_cache_gb), "--part", "vllm"],
            args.part_timeout_s,
            env,
        ),
        "data_parallel": data_parallel(args, sys.executable),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
