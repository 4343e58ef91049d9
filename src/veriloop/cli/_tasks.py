"""``veriloop tasks ...``: checking task sets."""

from __future__ import annotations

from pathlib import Path

import typer

app = typer.Typer(help="Check, import and generate task sets.", no_args_is_help=True)


@app.command("validate")
def validate(
    file: Path = typer.Argument(..., help="task set (.jsonl or .parquet)"),
) -> int:
    """Check every task: JSON, required fields, unique ids, known verifier kinds and their fields.

    Prints every problem as FILE: line N: ..., then a per-domain count. Exits 2 if any problem.
    """
    from rich.console import Console
    from rich.table import Table

    from veriloop.tasks import check_task_file

    result = check_task_file(file)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    for line in result.errors:
        err.print(line, style="red", markup=False)
    table = Table(title=f"{len(result.tasks)} valid tasks", title_justify="left")
    table.add_column("domain")
    table.add_column("tasks", justify="right")
    for domain, count in result.domain_counts().items():
        table.add_row(domain, str(count))
    Console(highlight=False).print(table)
    if result.errors:
        err.print(f"{len(result.errors)} problem(s) in {file}", style="bold red", markup=False)
        return 2
    return 0
