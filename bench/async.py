"""Asynchronous against synchronous RL on multi-turn code tasks, where sandbox time matters.

The quickstart's setting (a tiny Qwen2 model built locally, SFT on imperfect demonstrations,
then GRPO) with code tasks: each task asks for a program that prints the value of an
arithmetic expression, and the answer is run in the sandbox and judged on its output (the
``stdio`` verifier). Episodes are multi-turn (``rollout.feedback_on_fail``): after a failing
program the model reads the verifier's feedback and tries again, up to ``--max-turns`` turns,
each try another sandbox run. Each test run also waits ``--test-wait-ms`` inside the sandbox
before the program starts: test time that does not use this machine's cores, as with I/O-bound
tests or a sandbox service on other machines. ``--test-wait-ms 0`` leaves only the runs' own
CPU time, on the same two cores as generation and training.

The same training (same base model, seed and steps) runs three times, each in its own
process: synchronous, and asynchronous with ``max_staleness`` 1 and 2. Per run: sampled
trajectories per second over the training loop (dropped no-signal groups included), steps per
second, utilisation (trainer, generator and sandbox busy fractions, inference-to-training
ratio, queue depth, staleness histogram, the machine's CPU use) and the final model's held-out
pass@1 with its 95% interval (``run_eval`` with the training episode settings), plus each async
run's held-out difference from sync, paired task by task. The last line printed is a JSON
object with ``sync_samples_per_s``, ``async1_samples_per_s``, ``async2_samples_per_s``,
``async1_speedup``, ``async2_speedup``, the ``*_heldout_pass1`` (and the SFT base's),
``utilisation`` per run and every run's details under its name.

    .venv/bin/python bench/async.py [--steps 12] [--test-wait-ms 100] [--workdir DIR]

The whole benchmark takes about 7 minutes on two idle cores, SFT about 75 s of it; ``--workdir``
keeps the tasks and the SFT base model between invocations (without it everything goes to a
temporary directory). Timings move with other load on the machine: the JSON records the load
average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

SEED = 0
TRAIN_SEED, HELDOUT_SEED = 1, 2
GENERATOR = {
    "difficulty": 2,
    "operands": 2,
    "max_operands": 3,
    "max_operand": 19,
    "operators": "+-",
    "verifier": "exact",
}
MAX_TOKENS = (
    16  # a few tokens are used ("print(-13)"); the episode budget is 4x max_tokens x max_turns, observations included
)


_sandbox = {"seconds": 0.0, "runs": 0}  # code verification in this process: wall seconds, test runs
_sandbox_lock = threading.Lock()


def register_timed_stdio() -> None:
    """Verifier kind ``stdio_wait``: ``stdio`` whose test run first waits ``wait_ms`` inside the sandbox.

    The wait stands for test time that does not use this machine's cores: I/O-bound tests, or
    the round trip to a sandbox service on other machines. With ``wait_ms`` 0 it is ``stdio``
    exactly. Every check's wall time is added up (``_sandbox``), since the trainer's
    ``util/sandbox_busy_fraction`` counts tool runs only, not code verification.
    """
    from pydantic import Field

    from veriloop.verifiers import VERIFIERS, StdioConfig, extract_code, register_verifier

    if "stdio_wait" in VERIFIERS:
        return
    check_stdio = VERIFIERS.get("stdio").check

    class WaitingStdioConfig(StdioConfig):
        wait_ms: int = Field(default=0, ge=0, description="wall time each test run waits in the sandbox first")

    @register_verifier("stdio_wait", WaitingStdioConfig)
    def check(config: WaitingStdioConfig, task: Any, response: str) -> Any:
        program, _ = extract_code(response)
        if program.strip() and config.wait_ms:
            response = f"```python\nimport time\ntime.sleep({config.wait_ms / 1000})\n{program.rstrip()}\n```"
        started = time.perf_counter()
        try:
            return check_stdio(config, task, response)
        finally:
            with _sandbox_lock:
                _sandbox["seconds"] += time.perf_counter() - started
                _sandbox["runs"] += len(config.cases)


def waiting(task: Any, wait_ms: int) -> Any:
    return task.model_copy(update={"verifier": {**task.verifier, "kind": "stdio_wait", "wait_ms": wait_ms}})


def code_task(task: Any) -> Any:
    """An arithmetic task recast as a program to write: print the expression's value."""
    from veriloop.core import Task

    expression = task.metadata["expression"]
    return Task(
        id=task.id.replace("arithmetic/", "print/"),
        domain="code",
        prompt=f"Print the value of {expression}.",
        verifier={"kind": "stdio", "cases": [{"input": "", "output": task.gold}], "timeout_s": 5, "memory_mb": 256},
        gold=f"print({task.gold})",
        difficulty=task.difficulty,
        metadata=task.metadata,
    )


def make_tasks(train_size: int, heldout_size: int) -> tuple[list[Any], list[Any]]:
    from veriloop.tasks import decontaminate, generate_tasks

    heldout = generate_tasks("arithmetic", seed=HELDOUT_SEED, size=heldout_size, **GENERATOR)
    train = decontaminate(generate_tasks("arithmetic", seed=TRAIN_SEED, size=train_size, **GENERATOR), heldout)
    return [code_task(t) for t in train], [code_task(t) for t in heldout]


def demonstrations(tasks: list[Any]) -> list[list[dict[str, str]]]:
    """One-turn worked answers, wrong in the quickstart's systematic way so that RL has work to do."""
    rng = random.Random(SEED)
    rows = []
    for task in tasks:
        answer = int(task.verifier["cases"][0]["output"])
        operands = len(task.metadata["expression"].split()) // 2 + 1
        if operands == 2 and rng.random() < 0.2:
            answer += rng.choice([-3, -2, -1, 1, 2, 3])
        elif operands >= 3 and rng.random() < 0.65:
            answer += 1
        rows.append([{"role": "user", "content": task.prompt}, {"role": "assistant", "content": f"print({answer})"}])
    return rows


def prepare(workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Tasks, the tiny model and its SFT base in ``workdir`` (kept when they exist)."""
    from veriloop.core import Task, read_records, write_jsonl
    from veriloop.rollout import create_engine
    from veriloop.training import TinyModelSpec, init_tiny_model, train_sft
    from veriloop.training._model import save_final

    train_path, heldout_path, base = workdir / "train.jsonl", workdir / "heldout.jsonl", workdir / "base"
    if not (train_path.exists() and heldout_path.exists()):
        train, heldout = make_tasks(args.train_size, args.heldout_size)
        write_jsonl(train_path, train)
        write_jsonl(heldout_path, heldout)
    train = read_records(train_path, Task)
    started = time.perf_counter()
    if not (base / "config.json").exists():
        init_tiny_model(workdir / "tiny", TinyModelSpec(seed=SEED))
        engine = create_engine("hf", model=str(workdir / "tiny"))
        train_sft(
            engine.model,
            engine.tokenizer,
            demonstrations(train),
            steps=args.sft_steps,
            batch_size=64,
            lr=5e-4,
            warmup_steps=20,
            seed=SEED,
        )
        save_final(engine.model, engine.tokenizer, base)
    return {
        "base": str(base),
        "train": str(train_path),
        "heldout": str(heldout_path),
        "sft_s": round(time.perf_counter() - started, 1),
    }


def train_config(args: argparse.Namespace, paths: dict[str, Any], out: str, mode: str, staleness: int) -> Any:
    from veriloop.training import TrainConfig

    return TrainConfig.model_validate(
        {
            "model": {"path": paths["base"]},
            "rollout": {
                "prompts_per_step": args.prompts,
                "group_size": args.group_size,
                "max_tokens": MAX_TOKENS,
                "max_turns": args.max_turns,
                "feedback_on_fail": True,
                "temperature": 1.0,
            },
            "optim": {"lr": args.lr, "warmup_steps": 3, "micro_batch_size": args.micro_batch_size},
            "run": {
                "steps": args.steps,
                "seed": args.seed,
                "out": out,
                "checkpoint_every": 0,
                "save_trajectories": False,
                "loggers": ["jsonl"],
                "progress": False,
            },
            "pipeline": {
                "mode": mode,
                "max_staleness": staleness,
                "is_cap": args.is_cap,
                "stale_correction": args.stale_correction,
                "torch_threads": args.sync_torch_threads if mode == "sync" else args.async_torch_threads,
            },
        }
    )


def _machine_cpu_s() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine so far, from /proc/stat (all cores)."""
    fields = [float(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    ticks = os.sysconf("SC_CLK_TCK")
    idle = fields[3] + fields[4]  # idle and iowait
    return (sum(fields) - idle) / ticks, sum(fields) / ticks


def _process_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def child(args: argparse.Namespace) -> None:
    """One training run and the evaluation of its final model; prints ``RESULT {json}``."""
    from veriloop.evaluation import run_eval
    from veriloop.tasks import load_tasks
    from veriloop.training import RLTrainer, read_metrics
    from veriloop.verifiers import set_code_workers, start_code_sandbox

    paths = json.loads(args.paths)
    mode, staleness = ("sync", 0) if args.child == "sync" else ("async", int(args.child.removeprefix("async")))
    out = str(Path(args.out) / args.child)
    config = train_config(args, paths, out, mode, staleness)
    register_timed_stdio()
    set_code_workers(args.code_workers)
    start_code_sandbox()
    trainer = RLTrainer(config, tasks=[waiting(t, args.test_wait_ms) for t in load_tasks(paths["train"])])
    stamps: list[float] = []
    at_end: dict[str, float] = {}

    def on_step(step: int, metrics: dict[str, Any]) -> None:
        stamps.append(time.monotonic())
        if step == config.run.steps:  # the loop's end, before the final checkpoint and save
            at_end["machine_busy_s"], at_end["machine_total_s"] = _machine_cpu_s()
            at_end["process_s"], at_end["sandbox_s"], at_end["sandbox_runs"] = (
                _process_cpu_s(),
                _sandbox["seconds"],
                _sandbox["runs"],
            )

    machine_busy, machine_total = _machine_cpu_s()
    process, sandbox, sandbox_runs = _process_cpu_s(), _sandbox["seconds"], _sandbox["runs"]
    started = time.monotonic()
    trainer.train(on_step=on_step)
    train_s = stamps[-1] - started
    clock = time.perf_counter()
    # The final model on the held-out split with the training episode settings (plain stdio:
    # the same verdicts as stdio_wait, without the wait).
    heldout = load_tasks(paths["heldout"])
    summary = run_eval(
        str(Path(out) / "final"),
        heldout,
        samples=args.eval_samples,
        out=Path(out) / "eval",
        seed=SEED + 7,
        episode=trainer.episode,
        record=False,
        chunk_size=len(heldout),
        concurrency=1024,
    )
    records = [r for r in read_metrics(out) if "util/trainer_busy_s" in r]
    print(
        "RESULT "
        + json.dumps(
            {
                "train_s": train_s,
                "eval_s": time.perf_counter() - clock,
                "machine_busy_s": at_end["machine_busy_s"] - machine_busy,
                "machine_total_s": at_end["machine_total_s"] - machine_total,
                "process_cpu_s": at_end["process_s"] - process,
                "sandbox_s": at_end["sandbox_s"] - sandbox,
                "sandbox_runs": at_end["sandbox_runs"] - sandbox_runs,
                "records": records,
                "heldout_pass1": summary["pass@1"],
                "heldout_pass1_ci": summary["pass@1_ci"],
            }
        ),
        flush=True,
    )


def evaluate_base(args: argparse.Namespace, paths: dict[str, Any], out: Path) -> tuple[float, list[float]]:
    """Held-out pass@1 of the SFT base model, evaluated as the runs' final models are."""
    from veriloop.evaluation import run_eval
    from veriloop.tasks import load_tasks
    from veriloop.training import episode_config

    heldout = load_tasks(paths["heldout"])
    episode = episode_config(train_config(args, paths, str(out), "sync", 0))
    summary = run_eval(
        paths["base"],
        heldout,
        samples=args.eval_samples,
        out=out,
        seed=SEED + 7,
        episode=episode,
        record=False,
        chunk_size=len(heldout),
        concurrency=1024,
    )
    return round(summary["pass@1"], 4), [round(x, 4) for x in summary["pass@1_ci"]]


def summarize_run(result: dict[str, Any], group_size: int, code_workers: int) -> dict[str, Any]:
    """Throughput and utilisation of one run from its per-step records."""
    from veriloop.evaluation import pipeline_utilisation

    records = result["records"]
    sampled = sum(r.get("groups/sampled", 0) for r in records) * group_size
    trained = sum(r.get("groups/kept", 0) for r in records) * group_size
    utilisation = pipeline_utilisation(records)  # what the training report shows
    total_s = result["train_s"]
    mean = lambda key: statistics.fmean(r.get(key, 0.0) for r in records)  # noqa: E731
    return {
        "steps": len(records),
        # The whole machine's CPU use over the training loop (this run, its sandboxes and any
        # other load), and this process's own (trainer, generator, verifier threads).
        "machine_cpu_busy_fraction": round(result["machine_busy_s"] / max(result["machine_total_s"], 1e-9), 3),
        "process_cpu_cores": round(result["process_cpu_s"] / total_s, 3),
        "train_s": round(total_s, 2),
        "samples_per_s": round(sampled / total_s, 2),
        "trained_samples_per_s": round(trained / total_s, 2),
        "steps_per_s": round(len(records) / total_s, 4),
        "sampled": sampled,
        "trainer_busy_fraction": round(utilisation.trainer_busy, 3),
        "generator_busy_fraction": round(utilisation.generator_busy, 3),
        # Code verification's share of the sandbox workers' time over the training loop
        # (util/sandbox_busy_fraction counts tool runs only; these episodes use none). As many
        # checks run at once as there are workers (the rollout's verifier threads follow them).
        "sandbox_busy_fraction": round(result["sandbox_s"] / (total_s * code_workers), 3),
        "sandbox_runs_per_s": round(result["sandbox_runs"] / total_s, 2),
        "tool_sandbox_busy_fraction": round(utilisation.sandbox_busy or 0.0, 3),
        "inference_to_training": round(utilisation.inference_to_training or 0.0, 3),
        "trainer_busy_s_per_step": round(mean("util/trainer_busy_s"), 3),
        "trainer_wait_s_per_step": round(mean("util/trainer_wait_s"), 3),
        "generator_busy_s_per_step": round(mean("util/generator_busy_s"), 3),
        "generator_wait_s_per_step": round(mean("util/generator_wait_s"), 3),
        "engine_busy_s_per_step": round(mean("util/engine_busy_s"), 3),
        "update_s_per_step": round(mean("time/update_s"), 3),
        "queue_depth_mean": round(utilisation.queue_depth or 0.0, 3),
        "staleness_hist": {str(age): count for age, count in utilisation.staleness.items()},
        "reward_first_steps": round(statistics.fmean(r["reward/sampled_mean"] for r in records[:5]), 3),
        "reward_last_steps": round(statistics.fmean(r["reward/sampled_mean"] for r in records[-5:]), 3),
        "heldout_pass1": round(result["heldout_pass1"], 4),
        "heldout_pass1_ci": [round(x, 4) for x in result["heldout_pass1_ci"]],
        "eval_s": round(result["eval_s"], 1),
    }


_UTILISATION = (
    "trainer_busy_fraction",
    "generator_busy_fraction",
    "sandbox_busy_fraction",
    "inference_to_training",
    "machine_cpu_busy_fraction",
    "staleness_hist",
)


def paired_delta(before: Path, after: Path) -> dict[str, float]:
    """Held-out pass@1 of ``after`` minus ``before``, paired task by task, in points with a 95% interval."""
    from veriloop.evaluation import compare, load_run

    total = compare(load_run(before).samples, load_run(after).samples).total
    return {
        "points": round(100 * total.delta, 2),
        "ci_low": round(100 * total.ci_low, 2),
        "ci_high": round(100 * total.ci_high, 2),
        "p_value": round(total.p_value, 3),
    }


_FORWARDED = (
    "steps",
    "seed",
    "lr",
    "prompts",
    "group_size",
    "max_turns",
    "micro_batch_size",
    "sync_torch_threads",
    "async_torch_threads",
    "is_cap",
    "stale_correction",
    "code_workers",
    "test_wait_ms",
    "eval_samples",
)


def _child_args(args: argparse.Namespace) -> list[str]:
    return [f"--{name.replace('_', '-')}={getattr(args, name)}" for name in _FORWARDED]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=12, help="RL steps per run")
    parser.add_argument("--seed", type=int, default=0, help="seed of the RL runs (the same in all three)")
    parser.add_argument("--lr", type=float, default=1e-4, help="RL learning rate")
    parser.add_argument("--prompts", type=int, default=16, help="prompts per step")
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--max-turns", type=int, default=3)
    parser.add_argument("--micro-batch-size", type=int, default=256)
    parser.add_argument(
        "--sync-torch-threads", type=int, default=0, help="pipeline.torch_threads of the sync run (0: torch's default)"
    )
    parser.add_argument("--async-torch-threads", type=int, default=0, help="pipeline.torch_threads of the async runs")
    parser.add_argument("--is-cap", type=float, default=2.0, help="pipeline.is_cap of the async runs")
    parser.add_argument(
        "--stale-correction",
        default="behaviour",
        choices=["behaviour", "decoupled"],
        help="pipeline.stale_correction of the async runs",
    )
    parser.add_argument(
        "--code-workers",
        type=int,
        default=8,
        help="sandbox processes for code verification (also how many answers are verified at once)",
    )
    parser.add_argument(
        "--test-wait-ms", type=int, default=100, help="wall time each test run waits in the sandbox (0: none)"
    )
    parser.add_argument("--eval-samples", type=int, default=4, help="samples per held-out task")
    parser.add_argument("--train-size", type=int, default=3000)
    parser.add_argument("--heldout-size", type=int, default=200)
    parser.add_argument("--sft-steps", type=int, default=400)
    parser.add_argument("--runs", default="sync,async1,async2", help="which runs, comma-separated")
    parser.add_argument("--workdir", help="keep the tasks and the base model here between invocations")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--paths", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    return parser


def main() -> None:
    args = _parser().parse_args()
    if args.child:
        child(args)
        return
    with tempfile.TemporaryDirectory() as scratch:
        workdir = Path(args.workdir) if args.workdir else Path(scratch)
        workdir.mkdir(parents=True, exist_ok=True)
        load_before = os.getloadavg()[0]
        paths = prepare(workdir, args)
        summary: dict[str, Any] = {
            "bench": "async",
            "cpus": os.cpu_count(),
            "steps": args.steps,
            "seed": args.seed,
            "lr": args.lr,
            "prompts_per_step": args.prompts,
            "group_size": args.group_size,
            "max_turns": args.max_turns,
            "test_wait_ms": args.test_wait_ms,
            "code_workers": args.code_workers,
            "sync_torch_threads": args.sync_torch_threads,
            "async_torch_threads": args.async_torch_threads,
            "is_cap": args.is_cap,
            "stale_correction": args.stale_correction,
            "sft_s": paths["sft_s"],
        }
        runs_dir = Path(scratch) / "runs"
        summary["base_heldout_pass1"], summary["base_heldout_pass1_ci"] = evaluate_base(
            args, paths, runs_dir / "base-eval"
        )
        for name in args.runs.split(","):
            done = subprocess.run(
                [
                    sys.executable,
                    str(Path(__file__).resolve()),
                    "--child",
                    name,
                    "--paths",
                    json.dumps(paths),
                    "--out",
                    str(runs_dir),
                    *_child_args(args),
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
            if done.returncode != 0 or not lines:
                raise SystemExit(f"{name} run failed:\n{done.stderr[-3000:]}")
            run = summarize_run(json.loads(lines[-1][len("RESULT ") :]), args.group_size, args.code_workers)
            summary[name] = run
            print(f"{name}: {json.dumps(run)}", file=sys.stderr, flush=True)
        names = args.runs.split(",")
        for name in names:
            summary[f"{name}_samples_per_s"] = summary[name]["samples_per_s"]
            summary[f"{name}_heldout_pass1"] = summary[name]["heldout_pass1"]
            if name != "sync" and "sync" in names:
                summary[f"{name}_speedup"] = round(summary[name]["samples_per_s"] / summary["sync"]["samples_per_s"], 3)
                summary[f"{name}_heldout_delta_vs_sync"] = paired_delta(
                    runs_dir / "sync" / "eval", runs_dir / name / "eval"
                )
        summary["utilisation"] = {name: {key: summary[name][key] for key in _UTILISATION} for name in names}
        summary["load_average_1m"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
