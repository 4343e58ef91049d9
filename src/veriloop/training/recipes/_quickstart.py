"""``veriloop quickstart``: the whole loop on a laptop CPU, from nothing to a measured gain.

A tiny base model is built locally, taught arithmetic answers by SFT on imperfect worked
examples (so it is right only some of the time), then trained with GRPO against an exact
verifier, and both models are evaluated on a held-out split drawn with another seed. Every
stage writes its outputs atomically and is skipped when they exist, and RL resumes from its
checkpoints, so an interrupted quickstart continues where it stopped.

Why imperfect demonstrations: a model that imitates wrong answers is capped by them, while
a verifier rewards only right ones. The demonstrations here are wrong in a systematic way
(some two-operand answers off by 1-3, most three-operand answers off by +1), which SFT
copies and RL can unlearn within minutes on two cores.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from veriloop.core import Task, atomic_write, read_records, write_jsonl
from veriloop.training._config import Section, TrainConfig

Report = Callable[[str, int, int, str], None]
"""progress(stage, done, total, status)"""

# Under OUT:
TRAIN_FILE, HELDOUT_FILE = "tasks/train.jsonl", "tasks/heldout.jsonl"
RL_DIR, REPORT_FILE = "rl", "report.html"


class RecipeConfig(Section):
    """Settings every quickstart recipe has; each recipe adds ``out`` and its GRPO batch
    (``prompts_per_step``, ``max_tokens``: see ``recipe_rollout``), and those with an SFT stage
    ``sft_steps``, ``sft_batch_size`` and ``sft_lr``, with defaults of their own."""

    seed: int = Field(default=0, description="seed for the model, demonstrations and training")
    train_seed: int = Field(default=1, description="generator seed of the training split(s)")
    heldout_seed: int = Field(default=2, description="generator seed of the held-out split(s)")
    group_size: int = Field(default=8, ge=2, description="GRPO samples per prompt")
    rl_lr: float = Field(default=1e-4, gt=0, description="GRPO learning rate")
    eval_samples: int = Field(default=8, ge=1, description="samples per held-out task (pass@1 averaged over them)")
    temperature: float = Field(default=1.0, gt=0, description="sampling temperature for RL and evaluation")
    engine: Literal["hf", "vllm"] = Field(
        default="hf",
        description="what samples the GRPO rollouts: hf (the trainer's own model) or vllm (an in-process vLLM "
        "sent the weights after every update; needs `make setup-vllm` and runs from .venv-vllm)",
    )


class QuickstartConfig(RecipeConfig):
    out: str = Field(default="runs/quickstart", description="where everything is written")
    train_size: int = Field(default=5000, ge=1, description="training tasks")
    heldout_size: int = Field(default=300, ge=1, description="held-out tasks")
    operands: int = Field(default=2, ge=2, description="fewest numbers per question")
    max_operands: int = Field(default=3, ge=2, description="most numbers per question")
    max_operand: int = Field(default=19, ge=1, description="largest number in a question")
    two_operand_error: float = Field(
        default=0.2, ge=0, le=1, description="share of wrong two-operand arithmetic demonstrations"
    )
    three_operand_error: float = Field(
        default=0.65, ge=0, le=1, description="share of +1 three-operand arithmetic demonstrations"
    )
    operators: str = Field(default="+-", description="operators used")
    sft_steps: int = Field(default=1000, ge=1, description="SFT optimizer steps")
    sft_batch_size: int = Field(default=64, ge=1, description="conversations per SFT step")
    sft_lr: float = Field(default=5e-4, gt=0, description="SFT learning rate")
    rl_steps: int = Field(default=140, ge=1, description="GRPO steps")
    prompts_per_step: int = Field(default=64, ge=1, description="GRPO prompts per step")
    max_tokens: int = Field(default=6, ge=2, description="answer tokens at most")

    def generator_args(self) -> list[str]:
        """``tasks generate`` arguments of both splits, without --seed, --size and --out."""
        return [
            "arithmetic",
            "--difficulty",
            "2",
            "--operands",
            str(self.operands),
            "--max-operands",
            str(self.max_operands),
            "--max-operand",
            str(self.max_operand),
            "--operators",
            self.operators,
            "--verifier",
            "exact",
        ]

    def generator_options(self) -> dict[str, Any]:
        return {
            "difficulty": 2,
            "operands": self.operands,
            "max_operands": self.max_operands,
            "max_operand": self.max_operand,
            "operators": self.operators,
            "verifier": "exact",
        }


def recipe_rollout(config: Any, **more: Any) -> dict[str, Any]:
    """The ``rollout`` section of a recipe's GRPO run: its prompts, group size, answer budget,
    temperature and engine, plus ``more``."""
    fields = ("prompts_per_step", "group_size", "max_tokens", "temperature", "engine")
    return {**{name: getattr(config, name) for name in fields}, **more}


def stage_done(path: Path) -> bool:
    return (path / "config.json").exists() and any(path.glob("*.safetensors"))


def make_tasks(config: QuickstartConfig, out: Path) -> tuple[list[Task], list[Task], dict[str, Any]]:
    """Train and held-out splits from different seeds; train tasks seen in held-out are dropped."""
    from veriloop.tasks import contamination, decontaminate, generate_tasks

    train_path, heldout_path = out / TRAIN_FILE, out / HELDOUT_FILE
    if train_path.exists() and heldout_path.exists():
        train, heldout = read_records(train_path, Task), read_records(heldout_path, Task)
    else:
        options = config.generator_options()
        heldout = generate_tasks("arithmetic", seed=config.heldout_seed, size=config.heldout_size, **options)
        drawn = generate_tasks("arithmetic", seed=config.train_seed, size=config.train_size, **options)
        train = decontaminate(drawn, heldout)
        write_jsonl(heldout_path, heldout)
        write_jsonl(train_path, train)
    report = contamination(train, heldout)
    return (
        train,
        heldout,
        {
            "train_tasks": len(train),
            "heldout_tasks": len(heldout),
            "overlapping_heldout_tasks": len(report.contaminated_ids),
        },
    )


def demonstrations(config: QuickstartConfig, tasks: list[Task]) -> list[dict[str, Any]]:
    """Worked answers with systematic mistakes (see the module docstring)."""
    rng = random.Random(config.seed)
    rows = []
    for task in tasks:
        answer = demonstrated_sum(task, rng, config)
        rows.append(
            {
                "messages": [{"role": "user", "content": task.prompt}, {"role": "assistant", "content": str(answer)}],
                "task_id": task.id,
            }
        )
    return rows


def reporter(progress: Report | None) -> Report:
    """``progress`` with an optional status, or a no-op when there is none."""

    def report(stage: str, done: int, total: int, status: str = "") -> None:
        if progress is not None:
            progress(stage, done, total, status)

    return report


def sft_stage(
    config: RecipeConfig, out: Path, tiny: Path, rows: Callable[[], list[dict[str, Any]]], report: Report
) -> Path:
    """OUT/base: ``tiny`` fine-tuned on the demonstrations ``rows()`` (written to OUT/sft.jsonl)
    by ``config``'s sft_steps, sft_batch_size and sft_lr, unless it exists."""
    steps = config.sft_steps
    from veriloop.rollout import create_engine
    from veriloop.training._model import save_final
    from veriloop.training._sft import train_sft

    base = out / "base"
    if not stage_done(base):
        sft_rows = rows()
        write_jsonl(out / "sft.jsonl", sft_rows)
        engine = create_engine("hf", model=str(tiny))
        train_sft(
            engine.model,
            engine.tokenizer,
            [row["messages"] for row in sft_rows],
            steps=steps,
            batch_size=config.sft_batch_size,
            lr=config.sft_lr,
            warmup_steps=20,
            seed=config.seed,
            on_step=lambda s: report("sft", s.step + 1, steps, f"loss {s.loss:.3f}"),
        )
        save_final(engine.model, engine.tokenizer, base)
    report("sft", steps, steps, "")
    return base


def demonstrated_sum(task: Task, rng: random.Random, config: QuickstartConfig) -> int:
    """An arithmetic task's demonstrated answer: some two-operand answers off by 1-3, most
    three-operand answers off by +1 (the shares are ``config``'s)."""
    answer = int(task.gold)
    operands = len(task.metadata["expression"].split()) // 2 + 1
    if operands == 2 and rng.random() < config.two_operand_error:
        answer += rng.choice([-3, -2, -1, 1, 2, 3])
    elif operands >= 3 and rng.random() < config.three_operand_error:
        answer += 1
    return answer


def begin(config: RecipeConfig, progress: Report | None) -> tuple[Report, Path, Path]:
    """A recipe's start: its reporter, OUT (made) and OUT/tiny, the untrained tiny model
    (built unless it exists)."""
    from veriloop.training._tiny_model import TinyModelSpec, init_tiny_model

    if config.engine == "vllm":
        from veriloop.rollout import require_vllm

        require_vllm()  # before the stages that come before RL
    report = reporter(progress)
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    tiny = out / "tiny"
    if not stage_done(tiny):
        init_tiny_model(tiny, TinyModelSpec(seed=config.seed))
    report("model", 1, 1, "")
    return report, out, tiny


def run_quickstart(config: QuickstartConfig, progress: Report | None = None) -> dict[str, Any]:
    """Run (or continue) every stage; returns the summary also written to OUT/summary.json."""
    from veriloop.evaluation import compare, load_run, run_eval
    from veriloop.training._model import save_final
    from veriloop.training._metrics import read_metrics
    from veriloop.training._rl import RLTrainer

    started = time.perf_counter()
    report, out, tiny = begin(config, progress)
    timings: dict[str, float] = {}

    train, _, split = make_tasks(config, out)
    report("tasks", 1, 1, f"{split['train_tasks']} train, {split['heldout_tasks']} held out")

    clock = time.perf_counter()
    base = sft_stage(config, out, tiny, lambda: demonstrations(config, train), report)
    timings["sft_s"] = time.perf_counter() - clock

    final = out / "final"
    clock = time.perf_counter()
    rl_out = out / RL_DIR
    if not stage_done(final):
        rl_config = TrainConfig.model_validate(
            {
                "model": {"path": str(base)},
                "rollout": recipe_rollout(config),
                "optim": {"lr": config.rl_lr, "warmup_steps": 10, "micro_batch_size": 512},
                "run": {
                    "steps": config.rl_steps,
                    "seed": config.seed,
                    "out": str(rl_out),
                    "checkpoint_every": 10,
                    "save_trajectories": False,
                    "loggers": ["jsonl"],
                    "progress": False,
                },
            }
        )
        trainer = RLTrainer(rl_config, tasks=train)
        trainer.train(
            on_step=lambda step, m: report("rl", step, config.rl_steps, f"reward {m.get('reward/sampled_mean', 0):.3f}")
        )
        save_final(trainer.model, trainer.tokenizer, final)
    report("rl", config.rl_steps, config.rl_steps)
    timings["rl_s"] = time.perf_counter() - clock

    clock = time.perf_counter()
    evals = {}
    for name, model in (("base", base), ("final", final)):
        evals[name] = run_eval(
            str(model),
            out / HELDOUT_FILE,  # the file, not the tasks: the report then finds their gold answers
            samples=config.eval_samples,
            out=out / "eval" / name,
            temperature=config.temperature,
            max_tokens=config.max_tokens,
            seed=config.seed,
            record=False,
            on_progress=lambda done, total, name=name: report(f"eval {name}", done, total),
        )
    timings["eval_s"] = time.perf_counter() - clock

    comparison = compare(load_run(out / "eval" / "base").samples, load_run(out / "eval" / "final").samples)
    total = comparison.total
    report_path = out / REPORT_FILE
    rewards = [r["reward/sampled_mean"] for r in read_metrics(rl_out) if "reward/sampled_mean" in r]
    summary = {
        "base": str(base),
        "final": str(final),
        "report": str(report_path),
        "heldout_pass@1": {"base": evals["base"]["pass@1"], "final": evals["final"]["pass@1"]},
        "heldout_pass@1_gain_points": round(100 * (evals["final"]["pass@1"] - evals["base"]["pass@1"]), 2),
        "heldout_pass@1_gain_ci_points": [round(100 * total.ci_low, 2), round(100 * total.ci_high, 2)],
        "heldout_samples_per_task": config.eval_samples,
        "heldout_generate_args": config.generator_args(),
        "train_generate_args": [*config.generator_args(), "--seed", str(config.train_seed)],
        "splits": split,
        "reward_first_steps": rewards[:5],
        "reward_last_steps": rewards[-5:],
        "timings_s": {k: round(v, 1) for k, v in {**timings, "total_s": time.perf_counter() - started}.items()},
        "config": config.model_dump(),
    }
    write_quickstart_report(out, summary)
    with atomic_write(out / "summary.json") as handle:
        json.dump(summary, handle, indent=2)
    return summary


def write_quickstart_report(
    out: Path,
    summary: dict[str, Any],
    *,
    title: str = "veriloop quickstart",
    headline: Callable[[dict[str, Any]], str] | None = None,
) -> Path:
    """OUT/report.html over both held-out evals and the RL run, led by ``headline(summary)``
    (default ``quickstart_headline``)."""
    from veriloop.evaluation import write_report

    return write_report(
        [out / "eval" / "base", out / "eval" / "final", out / RL_DIR],
        out / REPORT_FILE,
        title=title,
        headline=(headline or quickstart_headline)(summary),
    )


def quickstart_headline(summary: dict[str, Any]) -> str:
    """The quickstart's result in one sentence, from its summary: held-out pass@1 before and
    after RL, and the difference with its paired-bootstrap 95% interval (in points)."""
    before, after = summary["heldout_pass@1"]["base"], summary["heldout_pass@1"]["final"]
    low, high = summary["heldout_pass@1_gain_ci_points"]
    return (
        f"Held-out pass@1 went from {100 * before:.1f}% before RL to {100 * after:.1f}% after: "
        f"{summary['heldout_pass@1_gain_points']:+.1f} points (paired 95% CI {low:+.1f} to {high:+.1f}) "
        f"on {summary['splits']['heldout_tasks']} held-out tasks, {summary['heldout_samples_per_task']} samples each."
    )
