"""``veriloop verify``: score a file of responses against a task set, or judge a run's stored
responses again with the current verifiers (``--rescore``)."""

from __future__ import annotations

from pathlib import Path

import typer


def start_sandbox_early(workers: int):
    """Start the code sandbox in a thread now, so its start-up overlaps imports and loading.

    Returns ``finish()``, which hands the sandbox to the code verifiers (or, if it could not
    start, leaves them to start their own and report the failure per check).
    """
    import threading

    started: dict = {}

    def start() -> None:
        try:
            from veriloop.verifiers import new_code_sandbox

            started["sandbox"] = new_code_sandbox(workers)
        except Exception:  # reported again by the first check that needs the sandbox
            pass

    thread = threading.Thread(target=start, name="sandbox-start", daemon=True)
    thread.start()

    def finish() -> None:
        from veriloop.verifiers import set_code_workers, start_code_sandbox, use_code_sandbox

        thread.join()
        if "sandbox" in started:
            use_code_sandbox(started["sandbox"])
        else:
            set_code_workers(workers)
        start_code_sandbox()

    return finish


def _responses(responses_path: Path) -> list:
    """Each row as a Response, or as the Score of a final workspace that cannot be judged (the
    same as an episode gives it); every other bad row reported at once."""
    from pydantic import ValidationError

    from veriloop.core import RowErrors, describe_validation_error, iter_objects, judgeable_response

    rows, errors = [], []
    for number, obj, error in iter_objects(responses_path):
        if error is None and not isinstance(obj, dict):
            error = "a row must be a JSON object"
        if error is None:
            try:
                rows.append((number, judgeable_response(obj)))
                continue
            except ValidationError as exc:
                error = describe_validation_error(exc)
        errors.append(f"{responses_path}: line {number}: {error}")
    if errors:
        raise RowErrors(errors)
    return rows


def _pairs(tasks_path: Path, responses_path: Path) -> list:
    """``(task, response or its Score)`` per response row, in order; every bad row reported at once."""
    from veriloop.core import RowErrors
    from veriloop.tasks import load_tasks

    tasks = {task.id: task for task in load_tasks(tasks_path)}
    rows = _responses(responses_path)
    errors = [
        f"{responses_path}: line {line}: task_id {row.task_id!r} is not in {tasks_path}"
        for line, row in rows
        if row.task_id not in tasks
    ]
    if errors:
        raise RowErrors(errors)
    return [(tasks[row.task_id], row) for _, row in rows]


def _scores(pairs: list, workers: int, advance) -> list:
    """Every row's score in order: rows already scored (an unjudgeable workspace) as they are."""
    from veriloop.core import Score
    from veriloop.verifiers import verify_many

    to_verify = [(task, row) for task, row in pairs if not isinstance(row, Score)]
    verified = iter(verify_many(to_verify, threads=2 * workers, on_score=lambda _: advance()))
    scores = []
    for _, row in pairs:
        if isinstance(row, Score):
            advance()
        scores.append(row if isinstance(row, Score) else next(verified))
    return scores


def _summary(scores: list, seconds: float) -> list[str]:
    from collections import defaultdict

    infra = [s for s in scores if s.status == "infra_error"]
    scored = [s for s in scores if s.status == "scored"]
    mean = sum(s.reward for s in scored) / len(scored) if scored else 0.0
    lines = [
        f"verified {len(scores)} responses in {seconds:.1f}s: mean reward {mean:.3f} over {len(scored)} scored, "
        f"{sum(s.passed for s in scores)} passed, {len(infra)} infra errors"
    ]
    reasons: dict[str, int] = defaultdict(int)
    for score in infra:
        reasons[(score.detail.splitlines() or [""])[0][:120]] += 1  # the first line: a judge keeps its prompt below
    lines += [f"  infra error x{count}: {reason}" for reason, count in sorted(reasons.items(), key=lambda r: -r[1])[:5]]
    return lines


def verify(
    tasks: list[Path] = typer.Option(
        [],
        "--tasks",
        help="task set (.jsonl or .parquet); with --rescore, the run's tasks if it records none (repeatable)",
    ),
    responses: Path | None = typer.Option(None, "--responses", help="responses: rows of id, task_id, response"),
    out: Path = typer.Option(
        ...,
        "--out",
        help="scores to write (.jsonl or .parquet); with --rescore, a folder for scores.jsonl and rescore.json",
    ),
    rescore: Path | None = typer.Option(
        None, "--rescore", help="an eval or training run directory: judge its stored responses again, now"
    ),
    workers: int = typer.Option(2, "--workers", min=1, max=256, help="sandboxed processes run at once"),
    plugins: list[str] = typer.Option(
        [], "--plugin", help="module or .py file that registers verifier kinds etc. (repeatable)"
    ),
) -> int:
    """Score every response with its task's verifier, in order, keeping each row's id.

    Writes one score row per response row (reward, passed, status, detail, feedback) and prints
    a summary on stderr. A grader failure is an infra_error, counted apart, never a reward of 0.
    A row whose final workspace is over bounds (too many files, too much content, a bad path)
    scores 0 with the reason, as in an episode; the other rows are scored as usual.

    With --rescore RUN, judges the responses an eval or training run stored (and the final
    workspaces it kept) with the current verifiers of the run's own task files (or --tasks), and
    reports per task and domain what changed and every flipped verdict; writes scores.jsonl and
    rescore.json in --out and leaves RUN untouched.
    """
    from veriloop.core import UserError

    if rescore is not None:
        if responses is not None:
            raise UserError("--rescore judges the run's stored responses: leave out --responses")
        return _rescore(rescore, tasks, out, workers, plugins)
    if responses is None or len(tasks) != 1:
        raise UserError("give --tasks FILE and --responses FILE, or --rescore RUN")
    finish_sandbox = start_sandbox_early(workers)  # first: everything below overlaps its start
    import gc
    import sys
    import time

    from veriloop.cli._judges import serve_judge_models
    from veriloop.core import load_plugins, write_records

    load_plugins(plugins)
    pairs = _pairs(tasks[0], responses)
    serve_judge_models({id(task): task.verifier for task, _ in pairs}.values())
    # What is loaded by now (modules, the task set) lives as long as the command: frozen, the
    # garbage collector stops rescanning it during verification (a full pass took up to 0.1 s).
    gc.freeze()
    finish_sandbox()
    started = time.perf_counter()
    scores = _verify_all(pairs, workers)
    write_records(out, scores)
    for line in _summary(scores, time.perf_counter() - started):
        print(line, file=sys.stderr)
    return 0


def _verify_all(pairs: list, workers: int) -> list:
    """The scores, with a progress bar on a terminal (rich is imported only for one)."""
    import sys

    if not sys.stderr.isatty():
        return _scores(pairs, workers, lambda: None)
    from rich.console import Console
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as progress:
        bar = progress.add_task("verifying", total=len(pairs))
        return _scores(pairs, workers, lambda: progress.advance(bar))


def _rescore(run: Path, tasks: list[Path], out: Path, workers: int, plugins: list[str]) -> int:
    """``verify --rescore``: the run's stored responses judged again, the changes printed on stderr."""
    import time

    from rich.console import Console

    from veriloop.core import load_plugins
    from veriloop.evaluation import rescore_destination, rescore_run, write_rescore

    rescore_destination(out, run)  # before any work: the run itself is never written to
    finish_sandbox = start_sandbox_early(workers)
    load_plugins(plugins)
    finish_sandbox()
    started = time.perf_counter()
    report, scores = rescore_run(run, [str(t) for t in tasks], threads=2 * workers)
    scores_path, report_path = write_rescore(out, report, scores)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    for line in _rescore_lines(report, time.perf_counter() - started):
        err.print(line, markup=False)
    err.print(f"wrote {scores_path} and {report_path}", markup=False)
    return 0


def _rescore_lines(report, seconds: float, shown: int = 10) -> list[str]:
    """The report as lines: counts, overall and per-domain changes, the first flips."""

    def change(name: str, block) -> str:
        before, after = block.before, block.after
        mean = " -> ".join("-" if m is None else f"{m:.3f}" for m in (before.mean_reward, after.mean_reward))
        return f"{name}: passed {before.passed} -> {after.passed} of {after.responses}, mean reward {mean}"

    skipped = sum(report.not_rescored.values())
    reasons = "; ".join(f"{why}: {count}" for why, count in report.not_rescored.items())
    lines = [
        f"re-scored {report.rescored} of {report.responses} responses of {report.run} ({report.run_kind} run) "
        f"in {seconds:.1f}s" + (f"; {skipped} not re-scored ({reasons})" if skipped else ""),
        change("overall", report.overall),
        *(change(f"  {domain}", block) for domain, block in report.domains.items()),
        f"{len(report.flips)} verdicts flipped, {report.reward_changed} rewards changed",
    ]
    for flip in report.flips[:shown]:
        verdicts = " -> ".join(_verdict(o) for o in (flip.before, flip.after))
        lines.append(f"  {flip.id}  {flip.task_id}  {verdicts}  {flip.feedback[:80]}".rstrip())
    if len(report.flips) > shown:
        lines.append(f"  ... and {len(report.flips) - shown} more in rescore.json")
    return lines


def _verdict(outcome) -> str:
    return "infra_error" if outcome.status == "infra_error" else ("passed" if outcome.passed else "failed")
