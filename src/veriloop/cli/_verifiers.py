"""``veriloop verifiers``: the verifier kinds with their fields and defaults, from the registry."""

from __future__ import annotations

import typer


def verifiers(
    kind: str | None = typer.Argument(None, help="show only this kind"),
    markdown: bool = typer.Option(
        False, "--markdown", help="print a Markdown table (as in the documentation's verifier reference)"
    ),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object per field"),
    plugins: list[str] = typer.Option([], "--plugin", help="module or .py file that registers verifier kinds etc."),
) -> int:
    """List the verifier kinds a task's ``verifier`` object may name, with every field."""
    import dataclasses
    import json

    import click
    from rich.console import Console
    from rich.table import Table

    from veriloop.core import UserError, load_plugins
    from veriloop.verifiers import VERIFIERS, markdown_table, verifier_fields

    load_plugins(plugins)
    fields = verifier_fields()
    if kind is not None:
        if kind not in VERIFIERS:
            raise UserError(f"unknown verifier kind {kind!r}; known: {', '.join(VERIFIERS.names())}")
        fields = [f for f in fields if f.kind == kind]
    if markdown:
        click.echo(markdown_table(fields), nl=False)
    elif as_json:
        for field in fields:
            click.echo(json.dumps(dataclasses.asdict(field)))
    else:
        table = Table(title="verifier kinds", title_justify="left")
        for column in ("kind", "field", "type", "default", "description"):
            table.add_column(column, overflow="fold")
        for field in fields:
            table.add_row(field.kind, field.field, field.type, field.default, field.description)
        Console(highlight=False).print(table)
    return 0
