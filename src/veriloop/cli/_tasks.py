"""``veriloop tasks ...``: checking task sets."""

from __future__ import annotations

from pathlib import Path

import typer

app = typer.Typer(help="Check, import and generate task sets.", no_args_is_help=True)


@app.command("validate")
def validate(
    file: Path = typer.Argument(..., help="task set (.jsonl or .parquet)"),
    plugins: list[str] = typer.Option(
        [], "--plugin", help="module or .py file that registers verifier kinds etc. (repeatable)"
    ),
) -> int:
    """Check every task: JSON, required fields, unique ids, known verifier kinds and their fields,
    and that every gold answer passes its own verifier.

    Prints every problem as FILE: line N: ..., then a per-domain count. Exits 2 if any problem.
    """
    from rich.console import Console
    from rich.table import Table

    from veriloop.cli._judges import serve_judge_models_of
    from veriloop.core import load_plugins
    from veriloop.tasks import check_task_file

    load_plugins(plugins)
    if file.is_file():
        serve_judge_models_of(file)
    result = check_task_file(file, gold=True)
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


_FREE_OPTIONS = {"allow_extra_args": True, "ignore_unknown_options": True}


def _write_tasks(out: Path, tasks: list, check_gold: bool = True) -> None:
    """Write ``tasks`` to ``out`` only if the file passes ``tasks validate`` (gold answers included)."""
    import os

    import click

    from veriloop.cli._judges import serve_judge_models
    from veriloop.core import RowErrors, write_records
    from veriloop.tasks import check_task_file

    if check_gold:
        serve_judge_models(task.verifier for task in tasks)
    staged = out.with_name(f".{out.stem}.unchecked{out.suffix}")
    count = write_records(staged, tasks)
    try:
        result = check_task_file(staged, gold=check_gold)
        if result.errors:
            raise RowErrors([line.replace(str(staged), str(out), 1) for line in result.errors])
        os.replace(staged, out)
    finally:
        staged.unlink(missing_ok=True)
    domains = sorted({task.domain for task in tasks})
    shown = ", ".join(domains[:5]) + (", ..." if len(domains) > 5 else "")
    click.echo(f"wrote {count} tasks ({shown}) to {out}", err=True)


@app.command("generate", context_settings=_FREE_OPTIONS)
def generate(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="generator: arithmetic, numeric-tables, ... (see 'tasks sources')"),
    seed: int = typer.Option(..., "--seed", help="random seed; the same seed gives the same tasks"),
    size: int = typer.Option(..., "--size", help="number of tasks"),
    out: Path = typer.Option(..., "--out", help="task file to write (.jsonl or .parquet)"),
) -> int:
    """Draw a seeded task set. Generator options follow as --name value (see 'tasks sources').

    The set is validated (gold answers included) before it is written; a failing set is not written.
    """
    from veriloop.cli._options import parse_extra_options
    from veriloop.tasks import generate_tasks

    options = parse_extra_options(ctx.args)
    _write_tasks(out, generate_tasks(name, seed=seed, size=size, **options))
    return 0


@app.command("import", context_settings=_FREE_OPTIONS)
def import_(
    ctx: typer.Context,
    source: str = typer.Argument(..., help="importer: jsonl, reasoning-gym, verl-parquet, ... (see 'tasks sources')"),
    out: Path = typer.Option(..., "--out", help="task file to write (.jsonl or .parquet)"),
    skip_gold_check: bool = typer.Option(
        False, "--skip-gold-check", help="check the schema only, not that every gold answer passes"
    ),
) -> int:
    """Convert existing data into a task set: SOURCE [FILE|DATASET] --out F, importer options as --name value.

    What would be written is validated first (every gold answer must pass its verifier unless
    --skip-gold-check); a set with problems is not written and the problems are listed (exit 2).
    """
    from veriloop.cli._options import parse_extra_options
    from veriloop.tasks import IMPORTERS

    importer = IMPORTERS.get(source)
    extra = list(ctx.args)
    # What to import (a file or a dataset name) comes first, before the importer's options.
    target = extra.pop(0) if extra and not extra[0].startswith("--") else None
    options = parse_extra_options(extra)
    if importer.argument is not None and target is not None:
        options[importer.argument] = target
    elif target is not None:
        options["target"] = target  # rejected by the options model with the list of known options
    _write_tasks(out, importer.run(options), check_gold=not skip_gold_check)
    return 0


@app.command("export-verl")
def export_verl(
    file: Path = typer.Argument(..., help="task set (.jsonl or .parquet)"),
    out: Path = typer.Option(..., "--out", help="Parquet file to write, in the layout verl's RLHFDataset reads"),
) -> int:
    """Write a task set as verl RL data: data_source, chat prompt, reward_model.ground_truth, and
    extra_info.task_id, which veriloop's verl compute_score uses to find each row's task."""
    import click

    from veriloop.integrations import write_verl_parquet
    from veriloop.tasks import load_tasks

    count = write_verl_parquet(out, load_tasks(file))
    click.echo(
        f"wrote {count} rows to {out}; score them with veriloop.integrations.compute_score "
        f"(reward_kwargs: tasks={file})",
        err=True,
    )
    return 0


@app.command("sources")
def sources() -> int:
    """List the task generators and importers with their options."""
    import click

    from veriloop.tasks import GENERATORS, IMPORTERS

    for title, registry in (("generators", GENERATORS), ("importers", IMPORTERS)):
        click.echo(f"{title}:")
        for name in registry:
            entry = registry.get(name)
            argument = f" {entry.argument.upper()}" if entry.argument else ""
            click.echo(f"  {name}{argument}  {entry.summary}")
            for option, help_text in entry.option_help():
                click.echo(f"      {option:<22} {help_text}")
    return 0


@app.command("contamination")
def contamination_(
    train: Path = typer.Argument(..., help="training task set"),
    heldout: Path = typer.Argument(..., help="held-out task set"),
    ngram: int = typer.Option(0, "--ngram", help="also flag questions sharing a run of this many words (0: off)"),
    as_json: bool = typer.Option(False, "--json", help="print the report as JSON"),
) -> int:
    """Report held-out tasks whose question also appears in the training set. Exits 1 if any."""
    import json

    import click

    from veriloop.tasks import contamination, load_tasks

    report = contamination(load_tasks(train), load_tasks(heldout), ngram=ngram or None)
    if as_json:
        click.echo(json.dumps(report.to_dict()))
    else:
        for overlap in report.overlaps[:20]:
            click.echo(f"{overlap.heldout_id}  ~  {overlap.train_id}  ({overlap.how})")
        if len(report.overlaps) > 20:
            click.echo(f"... and {len(report.overlaps) - 20} more")
        click.echo(
            f"{len(report.contaminated_ids)} of {report.heldout_size} held-out tasks "
            f"({report.fraction:.1%}) overlap the {report.train_size} training tasks"
        )
    return 0 if report.clean else 1


@app.command("overlap")
def overlap_(
    train: Path = typer.Argument(..., help="training task set"),
    eval_set: Path = typer.Argument(..., metavar="EVAL", help="eval task set"),
    ngram: int = typer.Option(8, "--ngram", min=1, help="length of the word runs compared"),
    as_json: bool = typer.Option(False, "--json", help="print the report as JSON"),
) -> int:
    """Report n-gram overlap between a training set and an eval set, by prompts and by gold
    answers (golds shorter than --ngram words are not compared). Exits 1 if any task overlaps."""
    import json

    import click

    from veriloop.evaluation import overlap
    from veriloop.tasks import load_tasks

    report = overlap(load_tasks(train), load_tasks(eval_set), ngram=ngram)
    if as_json:
        click.echo(json.dumps(report.to_dict()))
        return 0 if report.clean else 1
    found = report.prompt_overlaps + report.gold_overlaps
    for item in found[:20]:
        click.echo(f"{item.heldout_id}  ~  {item.train_id}  ({item.how})")
    if len(found) > 20:
        click.echo(f"... and {len(found) - 20} more")
    click.echo(
        f"{len(report.overlapping_ids)} of {report.eval_size} eval tasks ({report.fraction:.1%}) overlap the "
        f"{report.train_size} training tasks; {report.prompt_ngram_fraction:.1%} of eval prompt {ngram}-word runs "
        f"and {report.gold_ngram_fraction:.1%} of gold runs appear in the training set"
    )
    return 0 if report.clean else 1
