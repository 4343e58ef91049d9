"""``veriloop quickstart``: base model, SFT cold start, GRPO, held-out evaluation, report."""

from __future__ import annotations

import typer


def quickstart(
    overrides: list[str] = typer.Argument(None, help="FIELD=VALUE settings, e.g. rl_steps=50 out=runs/qs"),
) -> int:
    """Run the whole loop on CPU: writes runs/quickstart/{base,final,summary.json,report.html}.

    Interrupted? Run it again: finished stages are kept and RL resumes from its checkpoint.
    """
    import yaml
    from pydantic import ValidationError
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from veriloop.core import UserError, describe_validation_error
    from veriloop.training import QuickstartConfig, run_quickstart

    fields = {}
    for item in overrides or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise UserError(f"setting {item!r}: expected FIELD=VALUE, e.g. rl_steps=50")
        fields[key.strip()] = yaml.safe_load(value) if value.strip() else ""
    try:
        config = QuickstartConfig.model_validate(fields)
    except ValidationError as exc:
        raise UserError(f"quickstart: {describe_validation_error(exc)}") from None
    console = Console(stderr=True)
    bars: dict[str, int] = {}
    columns = [
        TextColumn("{task.description:<11}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
    ]
    with Progress(*columns, console=console) as progress:

        def report(stage: str, done: int, total: int, status: str) -> None:
            if stage not in bars:
                bars[stage] = progress.add_task(stage, total=total, status="")
            progress.update(bars[stage], completed=done, total=total, status=status)

        summary = run_quickstart(config, progress=report)
    gain = summary["heldout_pass@1_gain_points"]
    low, high = summary["heldout_pass@1_gain_ci_points"]
    console.print(
        f"held-out pass@1: base {100 * summary['heldout_pass@1']['base']:.1f}% -> "
        f"final {100 * summary['heldout_pass@1']['final']:.1f}% ({gain:+.1f} points, 95% CI {low:+.1f}..{high:+.1f})"
    )
    console.print(f"models:  {summary['base']}  {summary['final']}")
    console.print(f"summary: {config.out}/summary.json")
    console.print(f"report:  {summary['report']}")
    return 0
