"""``veriloop quickstart --recipe seed-loop``: code, math and tool use in one RL run on a CPU.

The seeds' main loop, shrunk to a tiny model: three generated domains, each with a training
and a held-out split drawn with different seeds; an SFT cold start on demonstrations that are
wrong in a known, systematic way; then GRPO over a fixed domain mixture (code 0.5, math 0.3,
tool use 0.2) with per-domain reward normalisation, while the seesaw monitor evaluates every
domain's held-out tasks every ``seesaw_every`` steps. Both models are then evaluated on the
held-out splits, per domain, with paired intervals.

The domains and the mistakes in their demonstrations:

* ``code`` (``code-functions``): one-line functions graded by ``python_tests`` on hidden
  inputs in the sandbox; reward = pass fraction, less a small penalty for unsafe behaviour of
  the graded run. A share of the "x plus a, times b" demonstrations leave out the parentheses.
* ``math`` (``word-problems``, ``math`` verifier): short word problems on place value (groups
  of ten or a hundred, bundles of hundreds, tens and ones); a share of the demonstrated answers
  make a place-value slip (a zero too many or too few, the digits reversed).
* ``tool`` (``tool-arithmetic``): products of three-digit numbers; the demonstration runs the
  product with ``<run_python>``, reads the result and ``<submit>``s it, except a share that
  answers at once with a guess. The tool call runs in the sandbox.

Two more domains can join (``domains=[code,math,tool,cad,financial]``; the default is the three
above, unchanged):

* ``cad`` (``cad --difficulty 1``: a plate with one or two holes, or a two-step shaft; the
  ``cad_geometry`` verifier runs the script in the sandbox on the ``cad`` environment, which must
  be built first). The demonstration is the reference script, except a share that leaves out the
  part's last feature (a hole, a shaft section). Scripts are hundreds of tokens, so the domain
  has its own turn budget (``max_tokens_by_domain``, default ``{cad: 416}``; see below).
* ``financial`` (``financial-docs --document statement --groups 1 --difficulty 1``: one figure
  read off a one-page income statement, ``document_fields``): the demonstration is the gold
  answer as a bare JSON object, except a share that gives it in the wrong unit (millions for
  thousands), the slip the verifier's feedback names.

Turn budgets. A turn may generate ``max_tokens`` (40) new tokens, except in the domains
``max_tokens_by_domain`` names. Measured with the recipe's tokenizer (the tiny model's, built
with seed 0) on every task of the train split (3,000, seed 1) and the held-out split (60,
seed 2), as ``len(tokenizer.encode(reply, add_special_tokens=False))``: a CAD reply (the
reference script in its ``python`` block) is 308-374 tokens, 375 with the end-of-turn token, so
``cad`` gets 416 (about 10% more than the longest; its prompts are 396-424 tokens, and 424 + 416
fit the model's 1,024 positions). A financial reply is 24-32 tokens (a unit slip included), 33
with the end-of-turn token, so ``financial`` keeps 40, as code, math and tool use do: the
default three-domain run is configured and samples exactly as before.

Prompts carry no tool-instruction system message (``rollout.tool_instructions`` off): the tags
are learnt from the demonstrations, and prompts stay a few tokens long. Stages are atomic and
skipped when done, and RL resumes from its checkpoints, as in ``veriloop quickstart``.
"""

from __future__ import annotations

import json
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from veriloop.core import Task, atomic_write, read_records, write_jsonl
from veriloop.rollout import check_domain_budgets
from veriloop.training._config import TrainConfig
from veriloop.training.recipes._quickstart import (
    recipe_rollout,
    REPORT_FILE,
    RL_DIR,
    RecipeConfig,
    Report,
    begin,
    sft_stage,
    stage_done,
    write_quickstart_report,
)

TOOLS = ("python", "submit")
DOMAIN_NAMES = ("code", "math", "tool", "cad", "financial")
DOMAIN_TURN_TOKENS = {"cad": 416}  # domains whose answers need more than max_tokens (module docstring)


class SeedLoopConfig(RecipeConfig):
    out: str = Field(default="runs/seed-loop", description="where everything is written")
    domains: list[str] = Field(
        default=["code", "math", "tool"], description=f"domains trained and evaluated, of: {', '.join(DOMAIN_NAMES)}"
    )
    train_size: int = Field(default=3000, ge=1, description="training tasks per domain")
    heldout_size: int = Field(default=60, ge=1, description="held-out tasks per domain")
    code_weight: float = Field(default=0.5, gt=0, description="share of code prompts in RL batches")
    math_weight: float = Field(default=0.3, gt=0, description="share of math prompts in RL batches")
    tool_weight: float = Field(default=0.2, gt=0, description="share of tool-use prompts in RL batches")
    cad_weight: float = Field(default=0.2, gt=0, description="share of CAD prompts in RL batches (with cad)")
    financial_weight: float = Field(
        default=0.2, gt=0, description="share of financial-statement prompts in RL batches (with financial)"
    )
    code_error: float = Field(default=0.5, ge=0, le=1, description="share of 'x plus a, times b' demos without ()")
    math_error: float = Field(default=0.4, ge=0, le=1, description="share of math demos with a place-value slip")
    tool_error: float = Field(default=0.4, ge=0, le=1, description="share of tool-use demos that guess, no tool")
    cad_error: float = Field(default=0.4, ge=0, le=1, description="share of CAD demos without the part's last feature")
    financial_error: float = Field(
        default=0.4, ge=0, le=1, description="share of financial demos in millions instead of thousands"
    )
    sft_steps: int = Field(default=600, ge=1, description="SFT optimizer steps")
    sft_batch_size: int = Field(default=32, ge=1, description="conversations per SFT step")
    sft_lr: float = Field(default=1e-3, gt=0, description="SFT learning rate")
    rl_steps: int = Field(default=40, ge=1, description="GRPO steps")
    prompts_per_step: int = Field(default=16, ge=1, description="GRPO prompts per step")
    group_size: int = Field(default=16, ge=2, description="GRPO samples per prompt (the seeds draw 16)")
    max_tokens: int = Field(
        default=40, ge=4, description="tokens per model turn at most (domains max_tokens_by_domain leaves out)"
    )
    max_tokens_by_domain: dict[str, int] = Field(
        default_factory=lambda: dict(DOMAIN_TURN_TOKENS),
        description="tokens per model turn at most in these domains (CAD scripts are 308-374 tokens)",
    )
    max_turns: int = Field(default=2, ge=2, description="model turns per episode (tool use: run, then submit)")
    seesaw_every: int = Field(default=10, ge=1, description="seesaw check of every domain every N RL steps")
    seesaw_tasks: int = Field(default=30, ge=1, description="held-out tasks per domain in a seesaw check")
    seesaw_samples: int = Field(default=2, ge=1, description="samples per task in a seesaw check")
    sandbox_workers: int = Field(default=2, ge=1, description="sandbox processes for code tests and tool calls")

    @field_validator("domains")
    @classmethod
    def _known_domains(cls, domains: list[str]) -> list[str]:
        unknown = [d for d in domains if d not in DOMAIN_NAMES]
        if unknown:
            raise ValueError(f"unknown domain(s) {', '.join(unknown)}; known: {', '.join(DOMAIN_NAMES)}")
        if not domains or len(set(domains)) != len(domains):
            raise ValueError("name each domain once, at least one, e.g. [code,math,tool]")
        return domains

    @field_validator("max_tokens_by_domain", mode="before")
    @classmethod
    def _known_budgets(cls, budgets: Any) -> dict[str, int]:
        budgets = check_domain_budgets(budgets)
        unknown = [d for d in budgets if d not in DOMAIN_NAMES]
        if unknown:
            raise ValueError(f"unknown domain(s) {', '.join(unknown)}; known: {', '.join(DOMAIN_NAMES)}")
        return budgets

    def weights(self) -> dict[str, float]:
        """Each chosen domain's share of RL prompts (``<domain>_weight``)."""
        return {name: getattr(self, f"{name}_weight") for name in self.domains}

    def turn_budgets(self) -> dict[str, int]:
        """The chosen domains' own tokens per turn (the others, and domains not chosen, take
        ``max_tokens``: the three default domains' runs are configured as before)."""
        return {name: tokens for name, tokens in self.max_tokens_by_domain.items() if name in self.domains}


Demonstrate = Callable[[Task, random.Random, SeedLoopConfig], list[dict[str, str]]]


@dataclass(frozen=True)
class SeedDomain:
    """One domain of the recipe: its generator, its options, and how its demonstrations go wrong."""

    name: str
    generator: str
    options: Callable[[SeedLoopConfig], dict[str, Any]]
    demonstrate: Demonstrate

    def generate_args(self, config: SeedLoopConfig) -> list[str]:
        """``veriloop tasks generate`` arguments of the domain, without --seed, --size and --out."""
        args = [self.generator]
        for name, value in self.options(config).items():
            args += ["--" + name.replace("_", "-"), str(value)]
        return args


def _reply(task: Task, *turns: str) -> list[dict[str, str]]:
    return [
        *task.messages(),
        *({"role": role, "content": text} for role, text in zip(("assistant", "tool") * 2, turns)),
    ]


def _code_demo(task: Task, rng: random.Random, config: SeedLoopConfig) -> list[dict[str, str]]:
    body = task.metadata["body"]
    if task.metadata["shape"] == "int-paren" and rng.random() < config.code_error:
        body = body.replace("(", "").replace(")", "")  # x + 2 * 3: the precedence slip
    argument = task.prompt.split("(", 1)[1].split(")", 1)[0]
    return _reply(task, f"def f({argument}):\n    return {body}")


def place_value_slip(task: Task, rng: random.Random) -> int:
    """A word problem's answer with a typical place-value slip: the digits of a bundle in reverse
    order, otherwise (and when they read the same both ways) a zero too many or too few."""
    answer = int(task.gold)
    if task.metadata["shape"] == "bundles":
        reversed_digits = int("".join(map(str, reversed(task.metadata["digits"]))))
        if reversed_digits != answer:
            return reversed_digits
    return answer * 10 if rng.random() < 0.5 else answer // 10


def _math_demo(task: Task, rng: random.Random, config: SeedLoopConfig) -> list[dict[str, str]]:
    answer = place_value_slip(task, rng) if rng.random() < config.math_error else int(task.gold)
    return _reply(task, str(answer))


def _tool_demo(task: Task, rng: random.Random, config: SeedLoopConfig) -> list[dict[str, str]]:
    if rng.random() < config.tool_error:
        guess = str(task.gold)[:2] + "".join(rng.choice("0123456789") for _ in str(task.gold)[2:])
        return _reply(task, f"<submit>{guess}</submit>")
    expression = task.metadata["expression"]
    return _reply(
        task, f"<run_python>print({expression})</run_python>", f"{task.gold}\n", f"<submit>{task.gold}</submit>"
    )


def missing_feature(script: str) -> str:
    """A CAD reference script without its last ``part = part ...`` line (a hole or a shaft
    section it adds or cuts); unchanged when it has none."""
    lines = script.split("\n")
    features = [i for i, line in enumerate(lines) if line.startswith("part = part ")]
    return "\n".join(lines[: features[-1]] + lines[features[-1] + 1 :]) if features else script


def _cad_demo(task: Task, rng: random.Random, config: SeedLoopConfig) -> list[dict[str, str]]:
    script = missing_feature(task.gold) if rng.random() < config.cad_error else task.gold
    return _reply(task, f"```python\n{script}```")


_UNIT_SLIPS = {"thousands": 1e-3, "millions": 1e3, "percent": 1e-2, "ratio": 1e2}  # the factor a wrong unit applies


def _financial_demo(task: Task, rng: random.Random, config: SeedLoopConfig) -> list[dict[str, str]]:
    answer = dict(task.gold)
    if rng.random() < config.financial_error:
        units = task.verifier["units"]
        answer = {name: round(value * _UNIT_SLIPS[units[name]], 6) for name, value in answer.items()}
    return _reply(task, json.dumps(answer))  # bare JSON: the fence costs a dozen tokens


DOMAINS = (
    SeedDomain(
        "code",
        "code-functions",
        lambda c: {
            "max_constant": 9,
            "dynamic_cases": 8,
            "unsafe_behaviour_penalty": 0.1,
            "stderr_penalty": 0.05,
            "domain": "code",
        },
        _code_demo,
    ),
    SeedDomain("math", "word-problems", lambda c: {"difficulty": 2, "domain": "math"}, _math_demo),
    SeedDomain("tool", "tool-arithmetic", lambda c: {"min_digits": 3, "max_digits": 3, "domain": "tool"}, _tool_demo),
    SeedDomain("cad", "cad", lambda c: {"difficulty": 1, "domain": "cad"}, _cad_demo),
    SeedDomain(
        "financial",
        "financial-docs",
        lambda c: {"document": "statement", "groups": 1, "difficulty": 1, "domain": "financial"},
        _financial_demo,
    ),
)


def chosen_domains(config: SeedLoopConfig) -> list[SeedDomain]:
    """The domains ``config.domains`` names, in its order."""
    by_name = {d.name: d for d in DOMAINS}
    return [by_name[name] for name in config.domains]


def check_environments(tasks: list[Task]) -> None:
    """UserError before any training when an environment the tasks run on is not built."""
    from veriloop.core import UserError
    from veriloop.sandbox import load_environment
    from veriloop.tasks import CAD_ENVIRONMENT_PACKAGES

    for name in sorted({t.environment for t in tasks if t.environment}):
        try:
            load_environment(name)
        except UserError as exc:
            packages = " ".join(CAD_ENVIRONMENT_PACKAGES)
            raise UserError(f"seed-loop domain cad: {exc} (its packages: {packages})") from None


def make_tasks(config: SeedLoopConfig, out: Path) -> tuple[list[Task], list[Task], dict[str, Any]]:
    """Each domain's train and held-out splits (different seeds; train tasks seen in held-out
    dropped), written under OUT/tasks; returns all train tasks, all held-out tasks, the split record."""
    from veriloop.tasks import contamination, decontaminate, generate_tasks

    train: list[Task] = []
    heldout: list[Task] = []
    record: dict[str, Any] = {}
    for domain in chosen_domains(config):
        train_path, heldout_path = out / f"tasks/{domain.name}-train.jsonl", out / f"tasks/{domain.name}-heldout.jsonl"
        if train_path.exists() and heldout_path.exists():
            domain_train, domain_heldout = read_records(train_path, Task), read_records(heldout_path, Task)
        else:
            options = domain.options(config)
            domain_heldout = generate_tasks(
                domain.generator, seed=config.heldout_seed, size=config.heldout_size, **options
            )
            drawn = generate_tasks(domain.generator, seed=config.train_seed, size=config.train_size, **options)
            domain_train = decontaminate(drawn, domain_heldout)
            write_jsonl(heldout_path, domain_heldout)
            write_jsonl(train_path, domain_train)
        overlap = contamination(domain_train, domain_heldout)
        record[domain.name] = {
            "train_tasks": len(domain_train),
            "heldout_tasks": len(domain_heldout),
            "overlapping_heldout_tasks": len(overlap.contaminated_ids),
        }
        train += domain_train
        heldout += domain_heldout
    write_jsonl(out / "tasks/heldout.jsonl", heldout)
    return train, heldout, record


def demonstrations(config: SeedLoopConfig, tasks: list[Task]) -> list[dict[str, Any]]:
    """One conversation per training task, with each domain's systematic mistakes."""
    rng = random.Random(config.seed)
    demonstrate = {d.name: d.demonstrate for d in DOMAINS}
    return [{"messages": demonstrate[t.domain](t, rng, config), "task_id": t.id} for t in tasks]


def seesaw_subset(config: SeedLoopConfig, heldout: list[Task]) -> list[Task]:
    """The first ``seesaw_tasks`` held-out tasks of each domain: what the seesaw monitor watches."""
    kept: dict[str, int] = {}
    subset = []
    for task in heldout:
        if kept.get(task.domain, 0) < config.seesaw_tasks:
            kept[task.domain] = kept.get(task.domain, 0) + 1
            subset.append(task)
    return subset


def rl_config(config: SeedLoopConfig, base: Path, out: Path) -> TrainConfig:
    """GRPO (dr_grpo advantages, so the schedule's per-domain scale survives) over the mixture."""
    return TrainConfig.model_validate(
        {
            "model": {"path": str(base)},
            "rollout": recipe_rollout(
                config,
                max_tokens_by_domain=config.turn_budgets(),
                max_turns=config.max_turns,
                tools=list(TOOLS),
                tool_instructions=False,
            ),
            "algorithm": {"advantage": "dr_grpo"},
            "optim": {"lr": config.rl_lr, "warmup_steps": 10, "micro_batch_size": 512},
            "run": {
                "steps": config.rl_steps,
                "seed": config.seed,
                "out": str(out),
                "checkpoint_every": config.seesaw_every,
                "save_trajectories": False,
                "loggers": ["jsonl"],
                "progress": False,
            },
            "schedule": {
                "weights": config.weights(),
                "normalization": "group",
                "seesaw_every": config.seesaw_every,
                "seesaw_samples": config.seesaw_samples,
                "seesaw_action": "warn",
            },
            "pipeline": {"sandbox_workers": config.sandbox_workers},
        }
    )


def eval_episode(config: SeedLoopConfig) -> Any:
    """The held-out evaluation's episodes: the RL episodes' tools, turns, turn budgets and sampling
    (what ``veriloop eval --tools python,submit --max-turns 2 --no-tool-instructions`` runs, with
    ``--domain-max-tokens cad=416`` when cad is chosen)."""
    from veriloop.evaluation import eval_episode_config

    return eval_episode_config(
        config.temperature,
        config.max_tokens,
        TOOLS,
        config.max_turns,
        tool_instructions=False,
        max_tokens_by_domain=config.turn_budgets(),
    )


def run_seed_loop(config: SeedLoopConfig, progress: Report | None = None) -> dict[str, Any]:
    """Run (or continue) every stage; returns the summary also written to OUT/summary.json."""
    from veriloop.training._model import save_final
    from veriloop.training._rl import RLTrainer

    started = time.perf_counter()
    report, out, tiny = begin(config, progress)
    timings: dict[str, float] = {}
    train, heldout, splits = make_tasks(config, out)
    check_environments(heldout)
    report("tasks", 1, 1, ", ".join(f"{d}: {s['train_tasks']}/{s['heldout_tasks']}" for d, s in splits.items()))

    clock = time.perf_counter()
    base = sft_stage(config, out, tiny, lambda: demonstrations(config, train), report)
    timings["sft_s"] = time.perf_counter() - clock

    final, clock = out / "final", time.perf_counter()
    if not stage_done(final):
        trainer = RLTrainer(rl_config(config, base, out / RL_DIR), tasks=train, heldout=seesaw_subset(config, heldout))

        def on_step(step: int, metrics: dict[str, Any]) -> None:
            rewards = " ".join(f"{d} {metrics.get(f'domain/{d}/reward', 0):.2f}" for d in config.domains)
            report("rl", step, config.rl_steps, rewards)

        trainer.train(on_step=on_step)
        save_final(trainer.model, trainer.tokenizer, final)
    report("rl", config.rl_steps, config.rl_steps)
    timings["rl_s"] = time.perf_counter() - clock

    clock = time.perf_counter()
    evals = evaluate_both(config, out, base, final, report)
    timings["eval_s"] = time.perf_counter() - clock
    summary = seed_loop_summary(config, out, evals, splits)
    summary["timings_s"] = {k: round(v, 1) for k, v in {**timings, "total_s": time.perf_counter() - started}.items()}
    write_seed_loop_report(out, summary)
    with atomic_write(out / "summary.json") as handle:
        json.dump(summary, handle, indent=2)
    return summary


def evaluate_both(config: SeedLoopConfig, out: Path, base: Path, final: Path, report: Report) -> dict[str, Any]:
    """Held-out evaluation of both models (every domain, ``eval_samples`` samples per task)."""
    from veriloop.evaluation import run_eval

    episode = eval_episode(config)
    return {
        name: run_eval(
            str(model),
            out / "tasks/heldout.jsonl",  # the file, not the tasks: the report then finds their gold answers
            samples=config.eval_samples,
            out=out / "eval" / name,
            episode=episode,
            seed=config.seed,
            record=False,
            on_progress=lambda done, total, name=name: report(f"eval {name}", done, total, ""),
        )
        for name, model in (("base", base), ("final", final))
    }


def seesaw_log(rl_out: Path) -> list[dict[str, Any]]:
    """The seesaw monitor's checks: step, held-out pass@1 per domain, deltas and verdict."""
    from veriloop.training._metrics import read_metrics

    log = []
    for record in read_metrics(rl_out):
        checked = {k.split("/")[1]: v for k, v in record.items() if k.endswith("/heldout_pass@1")}
        if checked:
            deltas = {k.split("/")[1]: v for k, v in record.items() if k.endswith("/heldout_delta")}
            entry = {"step": record["step"], "heldout_pass@1": checked, "delta_from_baseline": deltas}
            entry["fired"] = bool(record.get("seesaw/fired", 0))
            if "seesaw/message" in record:
                entry["message"] = record["seesaw/message"]
            log.append(entry)
    return log


def slide_back_points(log: list[dict[str, Any]]) -> dict[str, float]:
    """Per domain: points the last seesaw check lies below the best earlier one (0 if none)."""
    if len(log) < 2:
        return {}
    last = log[-1]["heldout_pass@1"]
    return {
        domain: round(100 * max(0.0, max(e["heldout_pass@1"].get(domain, 0.0) for e in log[:-1]) - value), 2)
        for domain, value in last.items()
    }


def _step_statistics(rl_out: Path) -> dict[str, float]:
    """Medians over RL steps: the sandbox's busy fraction of rollout time (tool calls), rollout
    tokens/s, inference:training time, verification seconds (code tests run in the sandbox)."""
    from veriloop.training._metrics import read_metrics

    records = [r for r in read_metrics(rl_out) if "util/sandbox_busy_fraction" in r]
    names = {
        "sandbox_busy_fraction": "util/sandbox_busy_fraction",
        "rollout_tokens_per_s": "rollout_tokens_per_s",
        "inference_to_training": "util/inference_to_training",
        "verify_busy_s": "util/verify_busy_s",  # summed over a step's episodes: code tests in the sandbox
        "step_s": "time/step_s",
    }
    return {name: round(statistics.median(r[key] for r in records), 3) for name, key in names.items() if records}


def seed_loop_summary(
    config: SeedLoopConfig, out: Path, evals: dict[str, Any], splits: dict[str, Any]
) -> dict[str, Any]:
    """The summary: per-domain held-out pass@1 of both models, paired intervals, the seesaw log, costs."""
    from veriloop.evaluation import compare, load_run

    comparison = compare(load_run(out / "eval" / "base").samples, load_run(out / "eval" / "final").samples)
    deltas = {d.domain: d for d in comparison.domains}
    domains = {}
    for domain in chosen_domains(config):
        delta = deltas[domain.name]
        domains[domain.name] = {
            "base": evals["base"]["domains"][domain.name]["pass@1"],
            "final": evals["final"]["domains"][domain.name]["pass@1"],
            "gain_points": round(100 * delta.delta, 2),
            "gain_ci_points": [round(100 * delta.ci_low, 2), round(100 * delta.ci_high, 2)],
        }
    log = seesaw_log(out / RL_DIR)
    return {
        "base": str(out / "base"),
        "final": str(out / "final"),
        "report": str(out / REPORT_FILE),
        "heldout_pass@1": domains,
        "heldout_samples_per_task": config.eval_samples,
        "heldout_generate_args": {d.name: d.generate_args(config) for d in chosen_domains(config)},
        "heldout_seed": config.heldout_seed,
        "train_seed": config.train_seed,
        "domain_weights": config.weights(),
        "splits": splits,
        "seesaw_log": log,
        "slide_back_points": slide_back_points(log),
        "rl_step_medians": _step_statistics(out / RL_DIR),
        "config": config.model_dump(),
    }


def write_seed_loop_report(out: Path, summary: dict[str, Any]) -> Path:
    """OUT/report.html over both held-out evals and the RL run (its per-domain curves)."""
    return write_quickstart_report(out, summary, title="veriloop quickstart: seed loop", headline=seed_loop_headline)


def domain_results(summary: dict[str, Any]) -> list[str]:
    """Per domain: held-out pass@1 before and after RL, the gain and its paired 95% interval."""
    parts = []
    for domain, block in summary["heldout_pass@1"].items():
        low, high = block["gain_ci_points"]
        parts.append(
            f"{domain} {100 * block['base']:.1f}% -> {100 * block['final']:.1f}% "
            f"({block['gain_points']:+.1f} points, 95% CI {low:+.1f} to {high:+.1f})"
        )
    return parts


def seed_loop_headline(summary: dict[str, Any]) -> str:
    """Held-out pass@1 before and after RL per domain, with the paired 95% intervals, in one line."""
    return f"Held-out pass@1 before and after RL: {'; '.join(domain_results(summary))}."
