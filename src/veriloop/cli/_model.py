"""``veriloop model ...`` and ``veriloop sft``: building and fine-tuning base models."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

app = typer.Typer(help="Build models locally.", no_args_is_help=True)


@app.command("init-tiny")
def init_tiny(
    out: Path = typer.Option(..., "--out", help="directory to write the model to"),
    seed: int = typer.Option(0, "--seed", help="seed for the tokenizer corpus and the weights"),
) -> int:
    """A tiny Qwen2 model (about 1M parameters) with its BPE tokenizer, built here without downloads."""
    from veriloop.training import TinyModelSpec, init_tiny_model

    path = init_tiny_model(out, TinyModelSpec(seed=seed))
    typer.echo(f"tiny model written to {path}")
    return 0


def sft(
    config: Path = typer.Argument(..., help="YAML config (sections: model, data, optim, run)"),
    overrides: list[str] = typer.Argument(None, help="SECTION.FIELD=VALUE overrides, e.g. optim.steps=100"),
) -> int:
    """Supervised fine-tuning on chat data, loss on assistant tokens only; saves the model to run.out.

    Data-parallel: start it with torchrun --nproc-per-node N -m veriloop sft CONFIG, or give
    distributed.ray_ranks=N to run N ranks as Ray actors."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from veriloop.training import SFTConfig, load_config, run_sft
    from veriloop.training._distributed import RankLost, ranks_from_environment

    settings = load_config(config, overrides or [], model=SFTConfig)
    console = Console(stderr=True)
    rank = ranks_from_environment()
    main = rank is None or rank.is_main
    with Progress(
        TextColumn("SFT"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        console=console,
        disable=not (settings.run.progress and main),
    ) as progress:
        bar = progress.add_task("sft", total=settings.optim.steps, status="")
        history: list[Any] = []

        def report(step: Any) -> None:
            progress.update(bar, completed=step.step + 1, status=f"loss {step.loss:.3f}")

        try:
            if settings.distributed.ray_ranks > 0 and rank is None:
                from veriloop.training._ray_ranks import train_on_ray  # ray is imported only here

                train_on_ray("sft", settings, on_step=report)
            else:
                history = run_sft(settings, on_step=report)
        except RankLost as error:
            console.print(f"error: {error}", markup=False, soft_wrap=True, style="red")
            return 1
    if main and history and history[0].step > 0:
        console.print(f"resumed from step {history[0].step} of {settings.run.out}", markup=False)
    if main:
        console.print(f"model saved to {settings.run.out}")
    return 0
