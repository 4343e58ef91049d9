"""Entry point: builds the typer app and turns UserErrors into one-line messages and exit 2.

Subcommand modules import their heavy dependencies inside the command functions, so that
``veriloop --help`` does not load torch, pydantic models or pyarrow.
"""

from __future__ import annotations

import sys

import click
import typer

from veriloop.cli import (
    _audit,
    _compare,
    _eval,
    _model,
    _quickstart,
    _report,
    _sandbox,
    _tasks,
    _train,
    _trajectories,
    _verify,
)

app = typer.Typer(
    name="veriloop",
    help="Reinforcement learning from verifiable rewards, and the evaluation loop around it.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(_tasks.app, name="tasks")
app.add_typer(_sandbox.app, name="sandbox")
app.add_typer(_trajectories.app, name="trajectories")
app.add_typer(_model.app, name="model")
app.command("sft")(_model.sft)
app.command("train")(_train.train)
app.command("quickstart")(_quickstart.quickstart)
app.command("verify")(_verify.verify)
app.command("audit")(_audit.audit)
app.command("eval")(_eval.eval_)
app.command("compare")(_compare.compare)
app.command("report")(_report.report)


def _print_user_error(exc: BaseException) -> None:
    lines = exc.lines() if hasattr(exc, "lines") else [str(exc)]
    for line in lines:
        click.secho(f"error: {line}" if len(lines) == 1 else line, fg="red", err=True)


def main(argv: list[str] | None = None) -> None:
    """Run the command line; exit 2 on user errors without a traceback."""
    from veriloop.core._errors import UserError

    command = typer.main.get_command(app)
    try:
        result = command.main(args=argv, prog_name="veriloop", standalone_mode=False)
    except UserError as exc:
        _print_user_error(exc)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    sys.exit(result if isinstance(result, int) else 0)
