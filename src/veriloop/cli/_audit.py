"""``veriloop audit``: red-team a task set's verifiers and report what fooled them."""

from __future__ import annotations

from pathlib import Path

import typer


def _table(report):
    from rich.table import Table

    table = Table(title=f"verifier audit: {report.tasks} tasks sampled", title_justify="left")
    for column, justify in (
        ("kind", "left"),
        ("threat", "left"),
        ("tasks", "right"),
        ("fooled", "right"),
        ("grader broke", "right"),
        ("max reward", "right"),
        ("worst case", "left"),
    ):
        table.add_column(column, justify=justify, overflow="fold")
    for row in report.rows:
        table.add_row(
            row.kind,
            row.category,
            str(row.tasks),
            str(row.fooled),
            str(row.broke),
            f"{row.max_reward:.2f}",
            row.example if not row.ok or row.max_reward > 0 else "",
            style=None if row.ok else "bold red",
        )
    return table


def _regression_cases(tasks: Path, files: list[Path]):  # type: ignore[no-untyped-def]
    """The reviewed hacks of ``files`` and of the task file's own regression file, if it has one."""
    from veriloop.core import UserError
    from veriloop.verifiers import read_regressions, regression_file_for

    own = regression_file_for(tasks)
    paths = [*files, *([own] if own.is_file() and own not in files else [])]
    for path in paths:
        if not path.is_file():
            raise UserError(f"{path}: no such regression file")
    return [case for path in paths for case in read_regressions(path)]


def audit(
    tasks: Path = typer.Option(..., "--tasks", help="task set (.jsonl or .parquet)"),
    out: Path = typer.Option(None, "--out", help="write the full report as JSON here"),
    repeats: int = typer.Option(2, "--repeats", min=1, max=20, help="runs of each gold answer (flakiness check)"),
    per_kind: int = typer.Option(25, "--per-kind", min=1, help="tasks sampled per verifier kind"),
    workers: int = typer.Option(2, "--workers", min=1, max=256, help="sandboxed processes run at once"),
    plugins: list[str] = typer.Option(
        [], "--plugin", help="module or .py file that registers verifier kinds etc. (repeatable)"
    ),
    regressions: list[Path] = typer.Option(
        [],
        "--regressions",
        help="reviewed hacks to replay (veriloop review export; TASKS.regressions.jsonl is read by itself)",
    ),
) -> int:
    """Red-team the task set's verifiers with a library of reward hacks and mutated gold answers.

    One exploit or more per threat category, adapted to each verifier kind; gold answers must
    pass and repeated runs must agree. Hacks people found in review (``veriloop review export``)
    are replayed too: from --regressions files and from TASKS.regressions.jsonl beside the task
    file. Prints a table, writes JSON with --out, and exits 1 when a verifier was fooled, broke,
    was flaky or rejected a gold answer or an honest form of it (the same value written another way).
    """
    import json
    import sys

    from rich.console import Console
    from rich.progress import Progress

    from veriloop.cli._judges import serve_judge_models
    from veriloop.cli._verify import start_sandbox_early

    from veriloop.core import atomic_write, load_plugins

    load_plugins(plugins)
    finish_sandbox = start_sandbox_early(workers)
    from veriloop.tasks import load_tasks
    from veriloop.verifiers import audit_tasks

    task_list = load_tasks(tasks)
    serve_judge_models(task.verifier for task in task_list)
    cases = _regression_cases(tasks, regressions)
    finish_sandbox()
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    with Progress(console=err, transient=True, disable=not sys.stderr.isatty()) as progress:
        bar = progress.add_task("auditing", total=None)
        report = audit_tasks(
            task_list,
            repeats=repeats,
            per_kind=per_kind,
            threads=2 * workers,
            on_score=lambda _: progress.advance(bar),
            regressions=cases,
        )
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
    console.print(_table(report))
    for line in (*report.gold_failures, *report.flaky, *report.weak, *report.honest_rejected):
        err.print(line, style="red", markup=False)
    if out is not None:
        with atomic_write(out) as handle:
            json.dump({"ok": report.ok, **report.model_dump(mode="json")}, handle, indent=2)
    if cases:
        err.print(
            f"{report.regressions_replayed} reviewed hacks replayed"
            + (
                f", {report.regressions_skipped} skipped (their task is not in this set)"
                if report.regressions_skipped
                else ""
            ),
            markup=False,
        )
    verdict = (
        "no verifier was fooled"
        if report.ok
        else "verifiers were fooled, broke, were flaky or rejected an honest answer"
    )
    err.print(
        f"{report.responses} responses checked: {verdict}", style="green" if report.ok else "bold red", markup=False
    )
    return 0 if report.ok else 1
