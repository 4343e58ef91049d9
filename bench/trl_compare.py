"""GRPO step time and peak memory: veriloop's trainer against TRL's GRPOTrainer, same work.

Same tiny Qwen2 model (hidden 128, 4 layers, BPE vocabulary of 512, built locally), same
prompts and reward (the answer contains a digit), 2 prompts x 8 samples, 32 completion tokens,
fp32 on CPU, no reference model, one update per batch, token-mean loss, group-std
advantages. Each trainer runs in its own process (so peak RSS is its own) for ``--steps``
steps; the figure is the median seconds per step over steps 3 onwards. The last line printed
is a JSON object with veriloop_s_per_step, trl_s_per_step, veriloop_peak_rss_mb, trl_peak_rss_mb.

With ``--model DIR`` the same comparison runs on that model (e.g. SmolLM2-135M-Instruct from
``veriloop model fetch``). ``--bf16`` runs both in bfloat16 mixed precision: TRL with
``bf16=True``, veriloop sampling from a bfloat16 snapshot with ``optim.autocast=bfloat16``
(float32 weights and AdamW in both). ``--lora-rank R`` trains veriloop's policy with LoRA
adapters instead of every weight (TRL trains every weight), to weigh that trade.

    .venv/bin/pip install 'trl>=0.20,<2'      # benchmark-only dependency
    .venv/bin/python bench/trl_compare.py [--steps 20]
    .venv/bin/python bench/trl_compare.py --model runs/smollm2/base --steps 6 --bf16
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROMPTS = [f"Write a number that is bigger than {i}." for i in range(64)]
DIGIT = re.compile(r"\d")
GROUP, PROMPTS_PER_STEP, NEW_TOKENS, LR = 8, 2, 32, 1e-5


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_veriloop(model_dir: str, steps: int, bf16: bool = False, lora_rank: int = 0) -> dict:
    from veriloop.core import Task
    from veriloop.training import RLTrainer, TrainConfig

    tasks = [
        Task(id=f"p{i}", domain="bench", prompt=p, verifier={"kind": "regex", "pattern": r"\d", "mode": "search"})
        for i, p in enumerate(PROMPTS)
    ]
    with tempfile.TemporaryDirectory() as out:
        config = TrainConfig.model_validate(
            {
                "model": {"path": model_dir, "lora_rank": lora_rank},
                "rollout": {
                    "prompts_per_step": PROMPTS_PER_STEP,
                    "group_size": GROUP,
                    "max_tokens": NEW_TOKENS,
                    "dtype": "bfloat16" if bf16 and lora_rank == 0 else "model",
                },
                "algorithm": {"dynamic_sampling": False, "clip_high": 0.2},
                "optim": {
                    "lr": LR,
                    "warmup_steps": 0,
                    "micro_batch_size": GROUP * PROMPTS_PER_STEP,
                    "autocast": "bfloat16" if bf16 else "none",
                },
                "run": {
                    "steps": steps,
                    "out": out,
                    "checkpoint_every": 0,
                    "save_trajectories": False,
                    "loggers": ["jsonl"],
                    "progress": False,
                },
            }
        )
        trainer = RLTrainer(config, tasks=tasks)
        times = []
        for _ in range(steps):
            started = time.perf_counter()
            trainer.step()
            times.append(time.perf_counter() - started)
    return {"step_times": times, "peak_rss_mb": _peak_rss_mb()}


def run_trl(model_dir: str, steps: int, bf16: bool = False, lora_rank: int = 0) -> dict:
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    def reward(completions, **_):
        return [1.0 if DIGIT.search(c[0]["content"] if isinstance(c, list) else c) else 0.0 for c in completions]

    times: list[float] = []

    class Timer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            self.started = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            times.append(time.perf_counter() - self.started)

    dataset = Dataset.from_list([{"prompt": [{"role": "user", "content": p}]} for p in PROMPTS])
    with tempfile.TemporaryDirectory() as out:
        args = GRPOConfig(
            output_dir=out,
            per_device_train_batch_size=GROUP * PROMPTS_PER_STEP,
            num_generations=GROUP,
            max_completion_length=NEW_TOKENS,
            learning_rate=LR,
            max_steps=steps,
            use_cpu=True,
            bf16=bf16,
            report_to="none",
            save_strategy="no",
            logging_steps=1000,
            beta=0.0,
            temperature=1.0,
            num_iterations=1,
            loss_type="dapo",
            scale_rewards="group",
            dataloader_num_workers=0,
            disable_tqdm=True,
            lr_scheduler_type="constant",
            warmup_steps=0,
        )
        trainer = GRPOTrainer(
            model=AutoModelForCausalLM.from_pretrained(model_dir),
            reward_funcs=reward,
            args=args,
            train_dataset=dataset,
            processing_class=AutoTokenizer.from_pretrained(model_dir),
            callbacks=[Timer()],
        )
        trainer.train()
    return {"step_times": times, "peak_rss_mb": _peak_rss_mb()}


def child(which: str, model_dir: str, steps: int, bf16: bool, lora_rank: int) -> None:
    import torch

    torch.manual_seed(0)
    result = (run_veriloop if which == "veriloop" else run_trl)(model_dir, steps, bf16, lora_rank)
    print("RESULT " + json.dumps(result))


def _tiny_model(directory: str) -> str:
    from veriloop.training import TinyModelSpec, init_tiny_model

    init_tiny_model(directory, TinyModelSpec(vocab_size=512))
    return directory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--child", choices=["veriloop", "trl"])
    parser.add_argument("--model-dir")
    parser.add_argument("--model", default="", help="a model directory to compare on (default: a tiny model)")
    parser.add_argument("--bf16", action="store_true", help="bfloat16 mixed precision in both trainers")
    parser.add_argument("--lora-rank", type=int, default=0, help="veriloop trains LoRA adapters of this rank")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.model_dir, args.steps, args.bf16, args.lora_rank)
        return
    summary: dict = {
        "bench": "trl_compare",
        "model": Path(args.model).name if args.model else "tiny-1M",
        "bf16": args.bf16,
        "veriloop_lora_rank": args.lora_rank,
        "prompts": PROMPTS_PER_STEP,
        "group_size": GROUP,
        "new_tokens": NEW_TOKENS,
        "steps": args.steps,
    }
    with tempfile.TemporaryDirectory() as scratch:
        model_dir = args.model or _tiny_model(scratch)
        for which in ("veriloop", "trl"):
            done = subprocess.run(
                [
                    sys.executable,
                    str(Path(__file__).resolve()),
                    "--child",
                    which,
                    "--model-dir",
                    model_dir,
                    "--steps",
                    str(args.steps),
                    "--lora-rank",
                    str(args.lora_rank),
                    *(["--bf16"] if args.bf16 else []),
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
            if done.returncode != 0 or not lines:
                raise SystemExit(f"{which} run failed:\n{done.stderr[-3000:]}")
            result = json.loads(lines[-1][len("RESULT ") :])
            summary[f"{which}_s_per_step"] = round(statistics.median(result["step_times"][2:]), 4)
            summary[f"{which}_peak_rss_mb"] = round(result["peak_rss_mb"], 1)
    summary["step_time_ratio"] = round(summary["veriloop_s_per_step"] / summary["trl_s_per_step"], 3)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
