"""``veriloop trajectories ...``: turning stored trajectories into reusable data."""

from __future__ import annotations

from pathlib import Path

import typer

app = typer.Typer(help="Work with stored trajectories.", no_args_is_help=True)


@app.command("export")
def export(
    store: Path = typer.Argument(..., help="trajectory store directory"),
    sft: Path | None = typer.Option(None, "--sft", help="write passing trajectories as chat SFT data (JSONL)"),
    pairs: Path | None = typer.Option(None, "--pairs", help="write (chosen, rejected) preference pairs (JSONL)"),
) -> int:
    """Export successful trajectories as SFT data, or passing/failing pairs as preference data."""
    from veriloop.core import UserError, write_jsonl
    from veriloop.rollout import TrajectoryStore, preference_pairs, sft_rows

    if sft is None and pairs is None:
        raise UserError("nothing to do: give --sft FILE and/or --pairs FILE")
    if not store.is_dir():
        raise UserError(f"{store}: no trajectory store here")
    trajectories = list(TrajectoryStore(store))
    if sft is not None:
        count = write_jsonl(sft, sft_rows(trajectories))
        typer.echo(f"{sft}: {count} SFT conversations from {len(trajectories)} trajectories")
    if pairs is not None:
        count = write_jsonl(pairs, preference_pairs(trajectories))
        typer.echo(f"{pairs}: {count} preference pairs")
    return 0
