"""Entry point: builds the typer app and turns UserErrors into one-line messages and exit 2.

Subcommand modules import their heavy dependencies inside the command functions, so that
``veriloop --help`` does not load torch, pydantic models or pyarrow.
"""

from __future__ import annotations

import sys
from typing import Any

import click
import typer

from veriloop.cli import (
    _audit,
    _compare,
    _env,
    _eval,
    _gateway,
    _model,
    _quickstart,
    _replay,
    _report,
    _review,
    _sandbox,
    _tasks,
    _train,
    _trajectories,
    _verifiers,
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
app.add_typer(_env.app, name="env")
app.add_typer(_trajectories.app, name="trajectories")
app.add_typer(_model.app, name="model")
app.add_typer(_review.app, name="review")
app.command("sft")(_model.sft)
app.command("train")(_train.train)
app.command("quickstart")(_quickstart.quickstart)
app.command("verify")(_verify.verify)
app.command("verifiers")(_verifiers.verifiers)
app.command("audit")(_audit.audit)
app.command("eval")(_eval.eval_)
app.command("compare")(_compare.compare)
app.command("report")(_report.report)
app.command("replay")(_replay.replay)
app.command("gateway")(_gateway.gateway)


def _print_user_error(exc: BaseException) -> None:
    lines = exc.lines() if hasattr(exc, "lines") else [str(exc)]
    for line in lines:
        click.secho(f"error: {line}" if len(lines) == 1 else line, fg="red", err=True)


def _click_exceptions(name: str) -> tuple[type[BaseException], ...]:
    """``name`` from click and from the copy of click that typer may ship (``typer._click``,
    ``typer.exceptions``): the parser raises the latter's classes, not the separate package's."""
    import importlib

    found = set()
    for module_name in ("click.exceptions", "typer.exceptions", "typer._click.exceptions"):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if isinstance(getattr(module, name, None), type):
            found.add(getattr(module, name))
    return tuple(found)


def _usage_line(exc: Any) -> str:
    """One line: what was wrong, and where help is."""
    context = getattr(exc, "ctx", None)
    where = f" (see '{context.command_path} --help')" if context is not None else ""
    return f"error: {exc.format_message()}{where}"


def main(argv: list[str] | None = None) -> None:
    """Run the command line; exit 2 on user and usage errors with one line and no traceback."""
    from veriloop.core import UserError

    command = typer.main.get_command(app)
    try:
        result = command.main(args=argv, prog_name="veriloop", standalone_mode=False)
    except UserError as exc:
        _print_user_error(exc)
        sys.exit(exc.exit_code)
    except _click_exceptions("Abort"):
        click.echo("aborted", err=True)
        sys.exit(130)
    except _click_exceptions("NoArgsIsHelpError") as exc:
        click.echo(exc.ctx.get_help())  # a command group run bare: its help, not an error
        sys.exit(0)
    except _click_exceptions("ClickException") as exc:
        click.secho(_usage_line(exc), fg="red", err=True)
        sys.exit(2 if exc.exit_code == 1 else exc.exit_code)
    sys.exit(result if isinstance(result, int) else 0)
