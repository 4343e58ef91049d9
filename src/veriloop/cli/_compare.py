"""``veriloop compare A B``: per-domain deltas with paired significance, flips, seesaw, gate."""

from __future__ import annotations

from pathlib import Path

import typer


def compare(
    baseline: Path = typer.Argument(..., help="eval directory of the baseline (A)"),
    candidate: Path = typer.Argument(..., help="eval directory of the candidate (B)"),
    gate: bool = typer.Option(
        False, "--gate", help="exit 1 when any domain (or the total) drops significantly by more than --max-drop"
    ),
    max_drop: float = typer.Option(
        0.0, "--max-drop", min=0.0, max=1.0, help="tolerated drop in pass@1 (0.02 = 2 points)"
    ),
    max_missing: float = typer.Option(
        0.05, "--max-missing", min=0.0, max=1.0, help="gate: share of either run's tasks the other may lack"
    ),
    max_infra: float = typer.Option(
        0.05, "--max-infra", min=0.0, max=1.0, help="gate: share of B's samples that may be infra errors"
    ),
    resamples: int = typer.Option(2000, "--resamples", min=100, help="paired bootstrap resamples"),
    seed: int = typer.Option(0, "--seed", help="bootstrap seed"),
    examples: int = typer.Option(3, "--examples", min=0, help="flipped tasks shown per direction"),
    as_json: bool = typer.Option(False, "--json", help="print the comparison as JSON"),
    allow_environment_change: bool = typer.Option(
        False, "--allow-environment-change", help="compare runs made on different builds of a task environment"
    ),
    max_false_pass: float | None = typer.Option(
        None,
        "--max-false-pass",
        min=0.0,
        max=1.0,
        help="gate: fail when B's reviewed false-pass rate is above this in any domain (veriloop review)",
    ),
    min_judgments: int = typer.Option(
        10, "--min-judgments", min=1, help="gate: judged passed samples a domain needs before --max-false-pass applies"
    ),
    registry: Path | None = typer.Option(
        None, "--registry", help="run registry holding B's review judgments (default: evals.sqlite beside B)"
    ),
) -> int:
    """Compare candidate B against baseline A task by task (B - A, paired bootstrap over tasks).

    Shows per-domain deltas with 95% intervals, tasks that flipped pass->fail and fail->pass,
    and a seesaw flag when one domain rises while another falls significantly. With --gate it
    exits 1 on a significant drop, and also when too little was compared: no paired task, more
    than --max-missing of either run's tasks unscored in the other, or more than --max-infra of
    B's samples infra errors. With --max-false-pass it also exits 1 when people reviewing B's
    samples judged more than that share of the verifier's passes in a domain to be hacks (among
    domains with at least --min-judgments such judgments).
    """
    import json

    import click

    from veriloop.evaluation import compare as compare_runs
    from veriloop.evaluation import load_run

    run_a, run_b = load_run(baseline), load_run(candidate)
    if not allow_environment_change:
        _same_environments(run_a, run_b)
    result = compare_runs(run_a.samples, run_b.samples, resamples=resamples, seed=seed)
    failures = result.gate_failures(max_drop, max_missing, max_infra) if gate else []
    review = (
        _review_gate(candidate, registry, max_false_pass, min_judgments)
        if gate and max_false_pass is not None
        else None
    )
    if review is not None:
        failures += review["failures"]
    if as_json:
        payload = result.to_dict(max_drop if gate else None, examples, max_missing, max_infra)
        if review is not None:
            payload["review_gate"] = review
            payload["gate"]["failures"] = failures  # type: ignore[index]
        click.echo(json.dumps(payload))
    else:
        _print(result, run_a, run_b, examples)
        if gate:
            for line in failures:
                click.secho(f"gate: {line}", fg="red", err=True)
            if review is not None:
                click.echo(
                    f"gate: reviewed false-pass rate checked over {review['judgments']} judgments of B's samples"
                )
            click.echo(f"gate: {'FAIL' if failures else 'pass'} (max drop {max_drop:.3f})")
    return 1 if failures else 0


def _review_gate(candidate: Path, registry: Path | None, max_false_pass: float, min_judgments: int) -> dict:
    """The false-pass gate over the judgments of B's samples (see ``false_pass_failures``)."""
    from veriloop.evaluation import JudgmentStore, agreement, default_registry_path, false_pass_failures

    path = registry if registry is not None else default_registry_path(candidate)
    report = agreement(JudgmentStore(path).latest([str(candidate.resolve())]))
    return {
        "registry": str(path),
        "max_false_pass": max_false_pass,
        "min_judgments": min_judgments,
        "judgments": report.total.judgments,
        "domains": {name: block.false_pass.model_dump(mode="json") for name, block in report.domains.items()},
        "failures": false_pass_failures(report, max_false_pass, min_judgments),
    }


def _same_environments(run_a, run_b) -> None:
    """A UserError when both runs used an environment of one name in two different builds."""
    from veriloop.core import UserError

    a, b = run_a.summary.get("environments") or {}, run_b.summary.get("environments") or {}
    changed = [
        f"{name} {a[name][:12]} in A, {b[name][:12]} in B" for name in sorted(set(a) & set(b)) if a[name] != b[name]
    ]
    if changed:
        raise UserError(
            f"the runs used different builds of their environments ({'; '.join(changed)}): a difference may be "
            "the packages', not the model's; pass --allow-environment-change to compare them anyway"
        )


def _print(result, run_a, run_b, examples: int) -> None:
    from rich.console import Console
    from rich.table import Table

    label_a, label_b = run_a.label, run_b.label
    console = Console(highlight=False, soft_wrap=True)
    table = Table(title=f"B = {label_b} vs A = {label_a} (pass@1, paired over tasks)", title_justify="left")
    for column in ("domain", "tasks", "A", "B", "B - A", "95% CI", "p", ""):
        table.add_column(column, justify="left" if column in ("domain", "") else "right")
    for d in result.domains:
        flag = {"up": "[green]up[/green]", "down": "[red]DOWN[/red]"}.get(d.direction, "")
        table.add_row(
            d.domain,
            str(d.tasks),
            f"{d.a:.3f}",
            f"{d.b:.3f}",
            f"{d.delta:+.3f}",
            f"[{d.ci_low:+.3f}, {d.ci_high:+.3f}]",
            f"{d.p_value:.3f}",
            flag,
        )
    console.print(table)
    console.print(f"{len(result.pass_to_fail)} tasks pass->fail, {len(result.fail_to_pass)} fail->pass", markup=False)
    for name, flips in (("pass->fail", result.pass_to_fail), ("fail->pass", result.fail_to_pass)):
        for flip in flips[:examples]:
            console.print(
                f"  {name} {flip.task_id} ({flip.domain}): {flip.a_rate:.2f} -> {flip.b_rate:.2f}; "
                f"B said {flip.response[:80]!r}; verifier: {flip.feedback[:100]}",
                markup=False,
            )
    if run_a.summary.get("task_set_hash") != run_b.summary.get("task_set_hash"):
        console.print("note: the runs used different task sets; tasks are paired by id", markup=False)
    if result.only_in_a or result.only_in_b:
        console.print(
            f"not compared: {result.only_in_a} tasks only in {label_a}, {result.only_in_b} only in {label_b}",
            markup=False,
        )
    if result.seesaw:
        console.print("[yellow]seesaw: one domain rose while another fell (both significant)[/yellow]")
