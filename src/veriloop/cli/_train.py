"""``veriloop train CONFIG``: GRPO-family RL from one YAML file, any field overridable.

The same command runs one rank of a data-parallel run when torchrun started it
(``torchrun --nproc-per-node N -m veriloop train CONFIG``; only rank 0 shows progress), and
drives N ranks on Ray with ``distributed.ray_ranks=N``.
"""

from __future__ import annotations

import signal
from pathlib import Path

import typer


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM (a scheduler's stop) ends like Ctrl-C: with the resume hint


def train(
    config: Path = typer.Argument(
        ..., help="YAML config (sections: model, data, rollout, algorithm, optim, run, schedule)"
    ),
    overrides: list[str] = typer.Argument(None, help="SECTION.FIELD=VALUE overrides, e.g. optim.lr=3e-5"),
) -> int:
    """Train a policy with RL on verifiable rewards; resumes from OUT/checkpoints when present.

    Data-parallel: start it with torchrun --nproc-per-node N -m veriloop train CONFIG, or give
    distributed.ray_ranks=N to run N ranks as Ray actors."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from veriloop.training import RLTrainer, load_config
    from veriloop.training import RankLost, ranks_from_environment

    settings = load_config(config, overrides or [])
    console = Console(stderr=True)
    rank = ranks_from_environment()
    on_ray = settings.distributed.ray_ranks > 0 and rank is None  # this process drives Ray ranks
    main = rank is None or rank.is_main
    trainer = None if on_ray else RLTrainer(settings)
    if trainer is not None and trainer.step_index and main:
        console.print(f"resumed from step {trainer.step_index} of {settings.run.out}", markup=False)
    # Without a terminal (nohup, batch jobs) the bar is invisible: plain lines, about 20 per run.
    plain_every = 0 if console.is_terminal else max(1, settings.run.steps // 20)
    resume_hint = " ".join(["veriloop train", str(config), *(overrides or [])])
    columns = [
        TextColumn("RL"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    ]
    first_step = trainer.step_index if trainer is not None else 0
    with Progress(*columns, console=console, disable=not (settings.run.progress and main)) as progress:
        bar = progress.add_task("train", total=settings.run.steps, completed=first_step, status="")

        def report(step: int, metrics: dict) -> None:
            status = f"reward {metrics.get('reward/sampled_mean', 0):.3f}"
            if "eval/pass@1" in metrics:
                status += f"  eval pass@1 {metrics['eval/pass@1']:.3f}"
            if "util/trainer_busy_fraction" in metrics:
                generator, trainer_busy = metrics["util/generator_busy_fraction"], metrics["util/trainer_busy_fraction"]
                status += f"  busy: generator {generator:.0%} trainer {trainer_busy:.0%}"
            if metrics.get("staleness/mean"):
                status += f"  staleness {metrics['staleness/mean']:.2f}"
            progress.update(bar, completed=step, status=status)
            if main and plain_every and (step % plain_every == 0 or step == settings.run.steps):
                console.print(f"step {step}/{settings.run.steps}  {status}", markup=False, highlight=False)

        previous_term = signal.signal(signal.SIGTERM, _interrupt)
        try:
            if trainer is None:
                from veriloop.training import train_on_ray  # ray is imported only here

                train_on_ray("rl", settings, on_step=report)
            else:
                trainer.train(on_step=report)
        except KeyboardInterrupt:
            where = f" at step {trainer.step_index}" if trainer is not None else ""
            console.print(
                f"stopped{where}; resume from its last checkpoint with: {resume_hint}", markup=False, soft_wrap=True
            )
            return 130
        except RankLost as error:
            console.print(f"error: {error}", markup=False, soft_wrap=True, style="red")
            return 1
        finally:
            signal.signal(signal.SIGTERM, previous_term)
    if not main:
        return 0
    from veriloop.training import ledger_summary, read_ledger

    accounting = ledger_summary(read_ledger(settings.run.out))
    dropped = ", ".join(f"{count} {reason}" for reason, count in sorted(accounting["dropped"].items())) or "none"
    console.print(
        f"prompts: {accounting['draws']} drawn, {accounting['trained']} trained, dropped: {dropped}"
        f"   ledger: {settings.run.out}/prompts.jsonl"
    )
    console.print(f"final model: {settings.run.out}/final   metrics: {settings.run.out}/metrics.jsonl")
    return 0
