"""``veriloop env ...``: build, list and remove the environments sandboxes run on."""

from __future__ import annotations

import json
import sys
from contextlib import nullcontext
from pathlib import Path

import typer

app = typer.Typer(
    help="Environments: read-only layers of pre-installed packages for the sandbox.", no_args_is_help=True
)


@app.command("build")
def build(
    name: str = typer.Argument(..., help="the environment's name (tasks refer to it by this name)"),
    packages: list[str] = typer.Option([], "--packages", help="requirement specifiers to install (repeatable)"),
    requirements: Path | None = typer.Option(None, "--requirements", help="a pip requirements file"),
    warm: list[str] = typer.Option(
        [], "--warm", help="modules to pre-import in warm interpreters (default: the packages' import names)"
    ),
    no_warm: bool = typer.Option(False, "--no-warm", help="pre-import nothing beyond the standard modules"),
    python: str | None = typer.Option(None, "--python", help="base interpreter (default: the sandbox's python3)"),
    links: list[str] = typer.Option(
        [], "--link", help="PATH=TARGET: a link in every sandbox's root, e.g. /app=/workspace (repeatable)"
    ),
    variables: list[str] = typer.Option(
        [], "--variable", help="NAME=VALUE set in every run, taken as written (repeatable)"
    ),
    extra: list[str] = typer.Argument(None, help="more packages, after the name"),
) -> None:
    """Build NAME from the package registry and print its hash (rebuilding replaces it)."""
    from rich.console import Console

    from veriloop.core import UserError
    from veriloop.sandbox import build_environment

    if warm and no_warm:
        raise UserError("--warm and --no-warm exclude each other")
    if requirements is not None and not requirements.is_file():
        raise UserError(f"--requirements: {requirements} is not a readable file")
    err = Console(stderr=True)
    chosen = [] if no_warm else (warm or None)
    with err.status(f"building environment {name}", spinner="dots") if sys.stderr.isatty() else nullcontext():
        environment = build_environment(
            name,
            [*packages, *(extra or [])],
            requirements,
            warm=chosen,
            python=python,
            log=lambda line: err.print(line, markup=False, highlight=False, style="dim"),
            links=_pairs("--link", links),
            variables=_pairs("--variable", variables),
        )
    size = environment.size_bytes / (1 << 20)
    err.print(
        f"built {environment.name}: {len(environment.installed)} distributions, {size:.1f} MiB, "
        f"pre-imports {', '.join(environment.warm) or 'nothing'}",
        markup=False,
        highlight=False,
    )
    typer.echo(environment.hash)


def _pairs(option: str, items: list[str]) -> dict[str, str]:
    """``["A=1", "B=2"]`` as ``{"A": "1", "B": "2"}``; UserError for an item without '='."""
    from veriloop.core import UserError

    pairs = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UserError(f"{option} {item!r}: write it as NAME=VALUE")
        pairs[key] = value
    return pairs


@app.command("list")
def list_(as_json: bool = typer.Option(False, "--json", help="one JSON object per environment")) -> None:
    """The environments built here, with their hashes and packages."""
    from dataclasses import asdict

    from veriloop.sandbox import environment_store, list_environments

    found = list_environments()
    if as_json:
        for environment in found:
            typer.echo(json.dumps(asdict(environment)))
        return
    if not found:
        typer.echo(f"no environments in {environment_store()}", err=True)
        return
    for environment in found:
        size = environment.size_bytes / (1 << 20)
        typer.echo(f"{environment.name}\t{environment.short_hash}\t{size:.1f} MiB\t{' '.join(environment.packages)}")


@app.command("rm")
def rm(name: str = typer.Argument(..., help="the environment to remove")) -> None:
    """Remove NAME (its manifest, then its files)."""
    from veriloop.sandbox import remove_environment

    environment = remove_environment(name)
    typer.echo(f"removed {environment.name} ({environment.short_hash})", err=True)
