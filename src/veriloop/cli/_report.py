"""``veriloop report DIR ... --out report.html``: one self-contained HTML report."""

from __future__ import annotations

from pathlib import Path

import typer


def report(
    dirs: list[Path] = typer.Argument(..., help="eval directories (in trend order) and training run directories"),
    out: Path = typer.Option(..., "--out", help="HTML file to write"),
    registry: Path | None = typer.Option(
        None, "--registry", help="also plot the registry's runs of the same task sets"
    ),
    failures: int = typer.Option(3, "--failures", min=0, help="failure examples shown per domain"),
    title: str = typer.Option("veriloop evaluation report", "--title", help="the report's heading"),
) -> int:
    """Write one self-contained HTML report over eval runs and training runs.

    pass@1 trends per domain, per-domain bars, reward curves of training runs, each eval run
    compared with the one before, and failure examples with the verifier's feedback."""
    import click

    from veriloop.evaluation import write_report

    path = write_report(dirs, out, registry=registry, failures_per_domain=failures, title=title)
    click.echo(f"wrote {path}", err=True)
    return 0
