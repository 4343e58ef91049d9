"""``veriloop quickstart``: base model, SFT cold start, GRPO, held-out evaluation, report.

Two recipes: ``arithmetic`` (the default: one domain, exact answers) and ``seed-loop`` (code,
math and tool use in one run, with domain weights, per-domain normalisation and the seesaw
monitor; ``veriloop.training.recipes._seed_loop``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import typer


@dataclass(frozen=True)
class Recipe:
    config: Callable[[], type]  # the recipe's pydantic config class
    run: Callable[[], Callable[..., dict[str, Any]]]
    results: Callable[[dict[str, Any]], list[str]]  # the lines printed after the run


def _arithmetic_results(summary: dict[str, Any]) -> list[str]:
    gain = summary["heldout_pass@1_gain_points"]
    low, high = summary["heldout_pass@1_gain_ci_points"]
    return [
        f"held-out pass@1: base {100 * summary['heldout_pass@1']['base']:.1f}% -> "
        f"final {100 * summary['heldout_pass@1']['final']:.1f}% ({gain:+.1f} points, 95% CI {low:+.1f}..{high:+.1f})"
    ]


def _seed_loop_results(summary: dict[str, Any]) -> list[str]:
    from veriloop.training import domain_results

    return ["held-out pass@1 " + line for line in domain_results(summary)]


def _training() -> Any:
    import veriloop.training

    return veriloop.training


RECIPES = {
    "arithmetic": Recipe(lambda: _training().QuickstartConfig, lambda: _training().run_quickstart, _arithmetic_results),
    "seed-loop": Recipe(lambda: _training().SeedLoopConfig, lambda: _training().run_seed_loop, _seed_loop_results),
    "smollm2": Recipe(
        lambda: _training().SmolLM2Config, lambda: _training().run_smollm2, lambda s: _training().smollm2_results(s)
    ),
}


def quickstart(
    overrides: list[str] = typer.Argument(None, help="FIELD=VALUE settings, e.g. rl_steps=50 out=runs/qs"),
    recipe: str = typer.Option(
        "arithmetic",
        "--recipe",
        help="arithmetic (one domain), seed-loop (code, math and tool use; domains=[...] adds cad, financial) or "
        "smollm2 (a real pretrained model, SmolLM2-135M-Instruct, fetched from PyPI)",
    ),
) -> int:
    """Run the whole loop on CPU: writes runs/quickstart/{base,final,summary.json,report.html}
    (runs/seed-loop/... with --recipe seed-loop, runs/smollm2/... with --recipe smollm2).

    Interrupted? Run it again: finished stages are kept and RL resumes from its checkpoint.
    """
    import yaml
    from pydantic import ValidationError
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from veriloop.core import UserError, describe_validation_error

    if recipe not in RECIPES:
        raise UserError(f"--recipe {recipe!r}: unknown recipe; known: {', '.join(RECIPES)}")
    chosen = RECIPES[recipe]
    fields = {}
    for item in overrides or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise UserError(f"setting {item!r}: expected FIELD=VALUE, e.g. rl_steps=50")
        fields[key.strip()] = yaml.safe_load(value) if value.strip() else ""
    try:
        config = chosen.config().model_validate(fields)
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

        summary = chosen.run()(config, progress=report)
    for line in chosen.results(summary):
        console.print(line)
    console.print(f"models:  {summary['base']}  {summary['final']}")
    console.print(f"summary: {config.out}/summary.json")
    console.print(f"report:  {summary['report']}")
    return 0
