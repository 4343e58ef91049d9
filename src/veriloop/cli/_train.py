"""``veriloop train CONFIG``: GRPO-family RL from one YAML file, any field overridable."""

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
    """Train a policy with RL on verifiable rewards; resumes from OUT/checkpoints when present."""
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

    settings = load_config(config, overrides or [])
    console = Console(stderr=True)
    trainer = RLTrainer(settings)
    if trainer.step_index:
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
    with Progress(*columns, console=console, disable=not settings.run.progress) as progress:
        bar = progress.add_task("train", total=settings.run.steps, completed=trainer.step_index, status="")

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
            if plain_every and (step % plain_every == 0 or step == settings.run.steps):
                console.print(f"step {step}/{settings.run.steps}  {status}", markup=False, highlight=False)

        previous_term = signal.signal(signal.SIGTERM, _interrupt)
        try:
            trainer.train(on_step=report)
        except KeyboardInterrupt:
            console.print(
                f"stopped at step {trainer.step_index}; resume from its last checkpoint with: {resume_hint}",
                markup=False,
                soft_wrap=True,
            )
            return 130
        finally:
            signal.signal(signal.SIGTERM, previous_term)
    from veriloop.training import ledger_summary, read_ledger

    accounting = ledger_summary(read_ledger(settings.run.out))
    dropped = ", ".join(f"{count} {reason}" for reason, count in sorted(accounting["dropped"].items())) or "none"
    console.print(
        f"prompts: {accounting['draws']} drawn, {accounting['trained']} trained, dropped: {dropped}"
        f"   ledger: {settings.run.out}/prompts.jsonl"
    )
    console.print(f"final model: {settings.run.out}/final   metrics: {settings.run.out}/metrics.jsonl")
    return 0
