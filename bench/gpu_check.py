"""The scale-out check on a GPU machine: what one GPU runs (a GRPO step, the hf and vllm engines'
generation side by side, the engine-vs-trainer mismatch, packed vs padded updates) and a 2-rank step.

The model is built once (``bench/gpu_step.py``'s Qwen2-0.5B shape, random weights; ``--shape
tiny`` on CPU), in bf16 on CUDA and float32 on CPU. Each part runs in its own process with its
own time limit (``--part-timeout-s``, and no part past ``--total-timeout-s`` in all), so that one
part failing or missing (no vLLM, one GPU) leaves the others' figures; one JSON line at the end:

- ``grpo_step``: ``bench/gpu_step.py``, GRPO steps (the ``hf`` engine's generation tokens/s
  inside a step and the training pass's MFU);
- ``hf_generate``, ``vllm_generate``: each engine alone on the same prompts, ``--prompts`` x
  ``--group-size`` samples of ``--new-tokens`` tokens (end-of-sequence ignored, so every sample
  is full length), all in one batch; vllm also times one full weight push. ``generation`` puts
  the two rates side by side;
- ``mismatch_hf``, ``mismatch_vllm``: one GRPO step (``--mismatch-prompts`` x ``--group-size``
  samples of ``--mismatch-new-tokens`` tokens) sampled by that engine; the trainer's log-probs
  of the batch's tokens against the engine's, turned into the ``mismatch/`` metrics the trainer
  logs by its own ``loss_inputs`` under every ``algorithm.correction`` mode (default bounds):
  mean and max |log pi_engine - log pi_trainer|, KL, and per mode the mean weight and the shares
  of tokens and sequences masked or capped;
- ``packing``: ``bench/packing.py`` on the same model and device, the recompute pass and one
  update over multi-turn episodes of mixed lengths, padded micro-batches
  (``--packing-micro-batch-size`` rows) against packed ones (``--packing-max-tokens`` tokens):
  step time and peak GPU memory of each;
- ``data_parallel``: ``torchrun --nproc-per-node 2 -m veriloop train`` (NCCL) on a tiny model
  for a few steps, when the machine has two GPUs or more; the step time of rank 0's last step.

The vllm parts run on ``--vllm-python`` and report why they were skipped when vLLM does not
import there (or as ``--vllm-skip`` says, which ``bench/gpu_check.sh`` sets when it could not
install vLLM).

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

from gpu_step import SHAPES, bench_tasks, build_model  # noqa: E402  (the bench folder is not a package)

PARTS = ("grpo_step", "hf_generate", "vllm_generate", "mismatch_hf", "packing", "mismatch_vllm", "data_parallel")
VLLM_PARTS = ("vllm_generate", "mismatch_vllm")
SHORTEST_PART_S = 20.0  # a part with less time left than this is not started


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


def _dtype(device: str) -> str:
    return "bfloat16" if device.startswith("cuda") else "float32"


def _device_name(device: str) -> str:
    import torch

    return torch.cuda.get_device_name() if device.startswith("cuda") else device


def _figure(value: float) -> float:
    return float(f"{value:.3g}")


def engine_generate(args: argparse.Namespace) -> dict:
    """This process's part: sample with ``--engine`` (hf or vllm) and time it (``--part generate``)."""
    import torch

    from veriloop.core import UserError
    from veriloop.rollout import SamplingParams, create_engine

    dtype, samples_wanted = _dtype(args.device), args.prompts * args.group_size
    options = {  # every sample in one batch, as in the GRPO step
        "hf": {"device": args.device, "max_batch_size": samples_wanted},
        "vllm": {"kv_cache_bytes": int(args.kv_cache_gb * 2**30), "max_num_seqs": samples_wanted},
    }[args.engine]
    started = time.perf_counter()
    try:
        engine = create_engine(args.engine, model=str(args.model_dir), dtype=dtype, **options)
    except UserError as exc:
        return {"bench": f"{args.engine}_generate", "skipped": str(exc)}
    start_s = time.perf_counter() - started
    prompts = [[5 + (i % 7), 9, 11 + i] for i in range(args.prompts)]
    params = SamplingParams(n=args.group_size, max_tokens=args.new_tokens, temperature=1.0, seed=0, ignore_eos=True)
    engine.generate(prompts[:1], params.model_copy(update={"n": 1, "max_tokens": 8}))  # warm-up
    started = time.perf_counter()
    samples = [s for group in engine.generate(prompts, params) for s in group]
    if args.device.startswith("cuda"):
        torch.cuda.synchronize()
    generate_s = time.perf_counter() - started
    tokens = sum(s.num_tokens for s in samples)
    result = {
        "bench": f"{args.engine}_generate",
        "device": _device_name(args.device),
        "shape": args.shape,
        "dtype": dtype,
        "samples": len(samples),
        "generated_tokens": tokens,
        "generate_s": round(generate_s, 3),
        "generation_tokens_per_s": round(tokens / generate_s, 1),
        "engine_start_s": round(start_s, 2),
    }
    if args.engine == "vllm":
        from transformers import AutoModelForCausalLM

        state = AutoModelForCausalLM.from_pretrained(args.model_dir, dtype=getattr(torch, dtype)).state_dict()
        started = time.perf_counter()
        engine.update_weights(state, version=1)
        result["weight_push_s"] = round(time.perf_counter() - started, 3)
    engine.close()
    return result


def engine_mismatch(args: argparse.Namespace) -> dict:
    """This process's part: one GRPO step sampled by ``--engine``, and the ``mismatch/`` metrics of
    its batch under every correction mode (``--part mismatch``)."""
    from veriloop.algorithms import CORRECTIONS
    from veriloop.core import UserError
    from veriloop.training import RLTrainer, TrainConfig
    from veriloop.training._objective import loss_inputs

    samples_wanted = args.mismatch_prompts * args.group_size
    with tempfile.TemporaryDirectory() as root:
        config = TrainConfig.model_validate(
            {
                "model": {"path": str(args.model_dir), "device": args.device, "dtype": _dtype(args.device)},
                "rollout": {
                    "engine": args.engine,
                    "prompts_per_step": args.mismatch_prompts,
                    "group_size": args.group_size,
                    "max_tokens": args.mismatch_new_tokens,
                    "max_batch_size": samples_wanted,
                    "concurrency": samples_wanted,
                    "vllm_kv_cache_mb": max(16, int(args.kv_cache_gb * 1024)),
                    "vllm_max_num_seqs": samples_wanted,
                },
                "algorithm": {"dynamic_sampling": False},
                "optim": {"lr": 1e-6, "warmup_steps": 0, "micro_batch_size": 32},
                "run": {
                    "steps": 1,
                    "out": str(Path(root) / "run"),
                    "checkpoint_every": 0,
                    "save_trajectories": False,
                    "loggers": ["jsonl"],
                    "progress": False,
                },
            }
        )
        try:
            trainer = RLTrainer(config, tasks=bench_tasks())
        except UserError as exc:
            return {"bench": f"mismatch_{args.engine}", "skipped": str(exc)}
        by_mode: dict[str, dict[str, float]] = {}
        tokens = []
        update = trainer._update

        def measured_update(inputs, *rest):  # before the update: the weights the batch was sampled with
            recomputed = trainer._recomputed(inputs.batch)  # (B, C) the trainer's log-probs of the sampled tokens
            tokens.append(int(inputs.batch.loss_mask.sum()))
            for mode in CORRECTIONS.names():
                algo = config.algorithm.model_copy(
                    update={"correction": config.algorithm.correction.model_copy(update={"mode": mode})}
                )
                _, by_mode[mode] = loss_inputs(
                    inputs.batch, inputs.advantages, None, False, algo, lambda: recomputed, trainer.ranks
                )
            return update(inputs, *rest)

        trainer._update = measured_update
        logged = trainer.step()
        trainer.close()
    gap = by_mode["none"]
    per_mode = ("weight_mean", "masked_token_fraction", "capped_token_fraction")
    per_mode += ("masked_sequence_fraction", "capped_sequence_fraction")
    return {
        "bench": f"mismatch_{args.engine}",
        "device": _device_name(args.device),
        "shape": args.shape,
        "dtype": _dtype(args.device),
        "samples": samples_wanted,
        "tokens": tokens[0],
        **{name: _figure(gap[f"mismatch/{name}"]) for name in ("abs_logprob_diff_mean", "abs_logprob_diff_max")},
        **{name: _figure(gap[f"mismatch/{name}"]) for name in ("kl_k3", "kl_k1")},
        "step_logged_abs_logprob_diff_mean": _figure(logged["mismatch/abs_logprob_diff_mean"]),
        "modes": {mode: {name: _figure(m[f"mismatch/{name}"]) for name in per_mode} for mode, m in by_mode.items()},
    }


def data_parallel(args: argparse.Namespace, python: str, timeout_s: float) -> dict:
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
        try:
            done = subprocess.run([*command, str(config_path)], capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return {"bench": "data_parallel", "error": f"did not finish within {timeout_s:.0f} s"}
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


def _commands(args: argparse.Namespace, model_dir: Path) -> dict[str, tuple[list[str], dict[str, str] | None]]:
    """Each part's command line (and environment) but data_parallel's, which runs from here."""
    shape = ["--device", args.device, "--shape", args.shape, "--model-dir", str(model_dir)]
    shared = [*shape, "--prompts", str(args.prompts), "--group-size", str(args.group_size)]
    shared += ["--new-tokens", str(args.new_tokens), "--kv-cache-gb", str(args.kv_cache_gb)]
    shared += ["--mismatch-prompts", str(args.mismatch_prompts), "--mismatch-new-tokens", str(args.mismatch_new_tokens)]
    # The vllm parts' Python may be another environment: it runs this checkout's veriloop too.
    source = str(BENCH.parent / "src") + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else "")
    vllm_env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "PYTHONPATH": source}
    packing = [sys.executable, str(BENCH / "packing.py"), "--model-dir", str(model_dir), "--device", args.device]
    packing += ["--prompts", str(args.prompts), "--group-size", str(args.group_size), "--repeats", "1"]
    packing += ["--micro-batch-size", str(args.packing_micro_batch_size), "--max-tokens", str(args.packing_max_tokens)]
    packing += ["--threads", str(min(len(os.sched_getaffinity(0)), 8))]
    step = [sys.executable, str(BENCH / "gpu_step.py"), *shape, "--prompts", str(args.prompts)]
    step += ["--group-size", str(args.group_size), "--new-tokens", str(args.new_tokens)]
    return {
        "grpo_step": (step, None),
        "hf_generate": ([sys.executable, __file__, *shared, "--part", "generate", "--engine", "hf"], None),
        "vllm_generate": ([args.vllm_python, __file__, *shared, "--part", "generate", "--engine", "vllm"], vllm_env),
        "mismatch_hf": ([sys.executable, __file__, *shared, "--part", "mismatch", "--engine", "hf"], None),
        "packing": (packing, None),
        "mismatch_vllm": ([args.vllm_python, __file__, *shared, "--part", "mismatch", "--engine", "vllm"], vllm_env),
    }


def run_parts(args: argparse.Namespace, parts: list[str], model_dir: Path, deadline: float) -> dict[str, dict]:
    """Each part in turn, within its own limit and what is left before ``deadline`` (``time.monotonic``)."""
    commands = _commands(args, model_dir)
    vllm_skip = args.vllm_skip
    results: dict[str, dict] = {}
    for name in parts:
        left = deadline - time.monotonic()
        if name in VLLM_PARTS and vllm_skip:
            results[name] = {"skipped": vllm_skip}
        elif left < SHORTEST_PART_S:
            results[name] = {"skipped": f"no time left within --total-timeout-s {args.total_timeout_s:.0f}"}
        elif name == "data_parallel":
            results[name] = data_parallel(args, sys.executable, min(args.part_timeout_s, left))
        else:
            command, env = commands[name]
            results[name] = _part(command, min(args.part_timeout_s, left), env)
        if name in VLLM_PARTS and "skipped" in results[name]:
            vllm_skip = results[name]["skipped"]  # the next vllm part would fail the same way
    return results


def side_by_side(results: dict[str, dict]) -> dict | None:
    """The two engines' generation rates on the same batch, when both ran."""
    rates = [results.get(f"{engine}_generate", {}).get("generation_tokens_per_s") for engine in ("hf", "vllm")]
    if None in rates:
        return None
    return {"hf_tokens_per_s": rates[0], "vllm_tokens_per_s": rates[1], "vllm_over_hf": round(rates[1] / rates[0], 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="qwen2-0.5b")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=512)
    parser.add_argument("--mismatch-prompts", type=int, default=8, help="prompts of the mismatch parts' step")
    parser.add_argument("--mismatch-new-tokens", type=int, default=256, help="new tokens per mismatch sample")
    parser.add_argument("--packing-micro-batch-size", type=int, default=8, help="rows per padded pass")
    parser.add_argument("--packing-max-tokens", type=int, default=16384, help="tokens per packed pass")
    parser.add_argument("--kv-cache-gb", type=float, default=16.0, help="vLLM's KV cache (use well under 1 on CPU)")
    parser.add_argument("--part-timeout-s", type=float, default=150.0, help="each part's time limit")
    parser.add_argument("--total-timeout-s", type=float, default=400.0, help="no part runs past this, from the start")
    parser.add_argument("--parts", default=",".join(PARTS), help="comma-separated parts to run, in this order")
    parser.add_argument("--vllm-python", default=sys.executable, help="the Python whose vllm the vllm parts use")
    parser.add_argument("--vllm-skip", default="", help="skip the vllm parts, giving this reason")
    parser.add_argument("--model-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--engine", choices=["hf", "vllm"], help=argparse.SUPPRESS)
    parser.add_argument("--part", choices=["generate", "mismatch"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.part:
        print(json.dumps({"generate": engine_generate, "mismatch": engine_mismatch}[args.part](args)))
        return
    parts = [name for name in args.parts.split(",") if name]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        parser.error(f"unknown parts {', '.join(unknown)}; known: {', '.join(PARTS)}")
    deadline = time.monotonic() + args.total_timeout_s
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(json.dumps({"bench": "gpu_check", "skipped": "no CUDA device (use --device cpu for the CPU path)"}))
        return
    result = {"bench": "gpu_check", "device": _device_name(args.device), "gpus": torch.cuda.device_count()}
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as root:
        model_dir = build_model(Path(root) / "model", SHAPES[args.shape])
        result |= run_parts(args, parts, model_dir, deadline)
    generation = side_by_side(result)
    if generation is not None:
        result["generation"] = generation
    print(json.dumps(result))


if __name__ == "__main__":
    main()
