"""``veriloop eval``: sample a model K times per task, score, and write rows and a summary."""

from __future__ import annotations

from pathlib import Path

import typer


def eval_(
    model: str = typer.Option(
        ..., "--model", help="HF model directory (or training run / checkpoint), or openai:MODEL@URL"
    ),
    tasks: list[Path] = typer.Option([], "--tasks", help="task set(s); several files may follow one --tasks"),
    more_tasks: list[Path] = typer.Argument(None, hidden=True, help="further task files after --tasks"),
    benchmark: str | None = typer.Option(
        None,
        "--benchmark",
        help="a benchmark of the shelf instead of --tasks: humaneval, gsm-symbolic, bfcl:CATEGORY "
        "(its source and package version go into the summary)",
    ),
    limit: int | None = typer.Option(None, "--limit", min=1, help="with --benchmark: only its first N tasks"),
    samples: int = typer.Option(1, "--samples", min=1, help="samples per task (K); pass@k is reported for k <= K"),
    out: Path = typer.Option(..., "--out", help="output directory; an interrupted eval resumes here"),
    temperature: float = typer.Option(1.0, "--temperature", min=0.0, help="sampling temperature (0: greedy)"),
    max_tokens: int = typer.Option(256, "--max-tokens", min=1, help="new tokens per model turn"),
    domain_max_tokens: list[str] = typer.Option(
        [],
        "--domain-max-tokens",
        help="DOMAIN=TOKENS: new tokens per model turn for the tasks of DOMAIN, e.g. cad=400 (repeatable; "
        "other domains: --max-tokens)",
    ),
    seed: int = typer.Option(0, "--seed", help="run seed; each sample's seed follows from it"),
    registry: Path | None = typer.Option(
        None, "--registry", help="run registry (SQLite); default: evals.sqlite beside --out"
    ),
    export_failures: Path | None = typer.Option(
        None, "--export-failures", help="write failed tasks with verifier feedback as a task set"
    ),
    train: list[Path] = typer.Option([], "--train", help="training task set: warn when the eval set overlaps it"),
    chunk_size: int = typer.Option(16, "--chunk-size", min=1, help="tasks per resumable part file"),
    device: str = typer.Option("cpu", "--device", help="device for a local model (cpu, cuda, cuda:1)"),
    dtype: str = typer.Option(
        "auto",
        "--dtype",
        help="precision of a local model: auto (bfloat16 on GPUs that have it, else float32), float32 or bfloat16 "
        "(on CPUs with bfloat16 units several times faster)",
    ),
    api_key_env: str = typer.Option(
        "OPENAI_API_KEY", "--api-key-env", help="environment variable holding the endpoint's key"
    ),
    too_long: str = typer.Option(
        "skip", "--too-long", help="prompts that leave no room in the model's context: skip (listed) or error"
    ),
    plugins: list[str] = typer.Option(
        [], "--plugin", help="module or .py file that registers verifier kinds etc. (repeatable)"
    ),
    tools: str = typer.Option("", "--tools", help="tools episodes may call, comma-separated: python, shell, submit"),
    max_turns: int = typer.Option(1, "--max-turns", min=1, help="model turns per episode (with --tools)"),
    context_budget: int | None = typer.Option(
        None, "--context-budget", help="most tokens in the model's context during a turn (local models)"
    ),
    context_policy: str = typer.Option(
        "stop", "--context-policy", help="when an observation would break the budget: truncate, drop_oldest, stop"
    ),
    tool_instructions: bool = typer.Option(
        True,
        "--tool-instructions/--no-tool-instructions",
        help="with --tools, open each prompt with a system message describing them (off for models that learnt the tags)",
    ),
) -> int:
    """Evaluate a model on task sets or a benchmark; writes OUT/summary.json and OUT/samples.parquet.

    One row per sample; the summary has pass@1 with a 95% interval, pass@k for k <= K,
    per-domain figures, infra errors counted apart, tokens and times. Killed and started again
    with the same arguments, it continues where it stopped.
    """
    import sys

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from veriloop.core import load_plugins
    from veriloop.evaluation import eval_episode_config, run_eval

    load_plugins(plugins)
    task_inputs, benchmark_record = _task_inputs([*tasks, *(more_tasks or [])], benchmark, limit)

    err = Console(stderr=True, highlight=False, soft_wrap=True)
    columns = [TextColumn("eval"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()]
    with Progress(*columns, console=err, transient=True, disable=not sys.stderr.isatty()) as progress:
        bar = progress.add_task("tasks", total=None)
        summary = run_eval(
            model,
            task_inputs,
            samples=samples,
            out=out,
            temperature=temperature,
            max_tokens=max_tokens,
            seed=seed,
            episode=eval_episode_config(
                temperature,
                max_tokens,
                _tool_names(tools),
                max_turns,
                context_budget,
                context_policy,
                tool_instructions,
                _domain_budgets(domain_max_tokens),
            ),
            registry=registry,
            export_failures=export_failures,
            train_tasks=train or None,
            chunk_size=chunk_size,
            device=device,
            dtype=dtype,
            api_key_env=api_key_env,
            too_long=too_long,
            on_progress=lambda done, total: progress.update(bar, completed=done, total=total),
            on_warning=lambda line: err.print(f"warning: {line}", style="yellow", markup=False),
            benchmark=benchmark_record,
        )
    for line in summary_lines(summary):
        err.print(line, markup=False)
    if summary["scored_samples"] == 0:
        causes = "; ".join(summary["infra_error_details"]) or "none recorded"
        err.print(f"error: no sample was scored (every one is an infra error): {causes}", style="red", markup=False)
        return 1
    return 0


def _task_inputs(files: list[Path], benchmark: str | None, limit: int | None) -> tuple[list, dict | None]:
    """The tasks to evaluate: the given files, or a benchmark's tasks with its record."""
    from veriloop.core import UserError

    if benchmark is not None and files:
        raise UserError("--benchmark and --tasks are mutually exclusive: give one of them")
    if benchmark is None:
        if not files:
            raise UserError("nothing to evaluate: give --tasks FILE or --benchmark NAME")
        if limit is not None:
            raise UserError("--limit goes with --benchmark; to evaluate part of a task file, write that part")
        return list(files), None
    from veriloop.evaluation import benchmark_tasks

    return benchmark_tasks(benchmark, limit)


def summary_lines(summary: dict) -> list[str]:
    """A few lines for people: totals, per-domain pass@1, infra errors, where things are."""
    k = str(summary["samples_per_task"])
    low, high = summary["pass@1_ci"]
    pass_at_1 = "n/a" if summary["pass@1"] is None else f"{summary['pass@1']:.3f}"
    lines = [
        f"{summary['model']}: pass@1 {pass_at_1} [{low:.3f}, {high:.3f}]"
        + (f"  pass@{k} {summary['pass@k'][k]:.3f}" if k != "1" and k in summary["pass@k"] else "")
        + f"  on {summary['tasks']} tasks x {k} samples"
    ]
    if "benchmark" in summary:
        mark = summary["benchmark"]
        part = "" if mark["complete"] else f", first {mark['tasks']} tasks only: not comparable with full-set figures"
        lines.append(f"  benchmark {mark['name']} ({mark['package']} {mark['version']}{part})")
    for domain, block in summary["domains"].items():
        shown = "n/a" if block["pass@1"] is None else f"{block['pass@1']:.3f}"
        lines.append(f"  {domain:<24} pass@1 {shown}  ({block['tasks']} tasks)")
    if summary["infra_errors"]:
        lines.append(
            f"  {summary['infra_errors']} infra errors on {summary['infra_error_tasks']} tasks (not counted as failures)"
        )
    if "exported_failures" in summary:
        lines.append(
            f"  {summary['exported_failures']['tasks']} failed tasks written to {summary['exported_failures']['path']}"
        )
    lines.append(f"wrote {summary['out']}/summary.json and samples.parquet")
    return lines


def _tool_names(text: str) -> tuple[str, ...]:
    from veriloop.core import UserError

    names = tuple(name.strip() for name in text.split(",") if name.strip())
    unknown = sorted(set(names) - {"python", "shell", "submit"})
    if unknown:
        raise UserError(f"--tools: unknown tool {unknown[0]!r}; choose from python, shell, submit")
    return names


def _domain_budgets(items: list[str]) -> dict[str, int]:
    """``["cad=400", ...]`` as ``{"cad": 400}``; a malformed item is a UserError (values are
    checked with the rest of the eval settings)."""
    from veriloop.core import UserError

    budgets: dict[str, int] = {}
    for item in items:
        domain, sep, tokens = item.partition("=")
        if not sep or not domain.strip() or not tokens.strip().lstrip("-").isdigit():
            raise UserError(f"--domain-max-tokens {item!r}: expected DOMAIN=TOKENS, e.g. cad=400")
        budgets[domain.strip()] = int(tokens)
    return budgets
