"""``veriloop train CONFIG``: GRPO-family RL from one YAML file, any field overridable."""

from __future__ import annotations

from pathlib import Path

import typer


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
                status += f"  busy: generator {metrics['util/generator_busy_fraction']:.0%} trainer {metrics['util/trainer_busy_fraction']:.0%}"
            if metrics.get("staleness/mean"):
                status += f"  staleness {metrics['staleness/mean']:.2f}"
            progress.update(bar, completed=step, status=status)

        trainer.train(on_step=report)
    from veriloop.training import ledger_summary, read_ledger

    accounting = ledger_summary(read_ledger(settings.run.out))
    dropped = ", ".join(f"{count} {reason}" for reason, count in sorted(accounting["dropped"].items())) or "none"
    console.print(
        f"prompts: {accounting['draws']} drawn, {accounting['trained']} trained, dropped: {dropped}"
        f"   ledger: {settings.run.out}/prompts.jsonl"
    )
    console.print(f"final model: {settings.run.out}/final   metrics: {settings.run.out}/metrics.jsonl")
    return 0
