"""``veriloop review RUN...``: the spot-check web application; ``review stats`` and ``review export``.

``veriloop review RUN...`` is short for ``veriloop review serve RUN...``.
"""

from __future__ import annotations

from pathlib import Path

import typer
from typer.core import TyperGroup


class _ServeByDefault(TyperGroup):
    """A group whose first argument, when it names no subcommand, goes to ``serve``."""

    def parse_args(self, ctx, args):  # type: ignore[no-untyped-def]
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["serve", *args]
        return super().parse_args(ctx, args)


app = typer.Typer(
    cls=_ServeByDefault,
    help="Spot-check verifier verdicts in a local web page; judgments become figures and regression tests.",
    no_args_is_help=True,
)

RUNS_HELP = "eval run directories, trajectory stores or training run directories (checkpoints in order)"
REGISTRY_HELP = "run registry that holds the judgments (default: evals.sqlite beside the first run)"


def _registry(runs: list[Path], registry: Path | None) -> Path:
    from veriloop.evaluation import default_registry_path
    from veriloop.review import resolve_run

    return registry if registry is not None else default_registry_path(resolve_run(runs[0]))


def _latest(runs: list[Path], registry: Path | None):  # type: ignore[no-untyped-def]
    from veriloop.core import UserError
    from veriloop.evaluation import JudgmentStore
    from veriloop.review import resolve_run

    path = _registry(runs, registry)
    if not path.is_file():
        raise UserError(
            f"{path}: no run registry here, so no judgments yet (review the runs first, or pass --registry)"
        )
    return JudgmentStore(path).latest(str(resolve_run(run).resolve()) for run in runs)


def _stratify(text: str) -> tuple[str, ...]:
    from veriloop.core import UserError

    keys = tuple(key.strip() for key in text.split(",") if key.strip())
    unknown = [key for key in keys if key not in ("domain", "verifier_kind", "outcome")]
    if unknown:
        raise UserError(f"--stratify-by: unknown key {unknown[0]!r} (known: domain, verifier_kind, outcome)")
    return keys


@app.command("serve")
def serve(
    runs: list[Path] = typer.Argument(..., help=RUNS_HELP),
    port: int = typer.Option(8765, "--port", min=0, max=65535),
    host: str = typer.Option("127.0.0.1", "--host", help="address to listen on (not loopback: needs --token)"),
    token: str | None = typer.Option(
        None, "--token", envvar="VERILOOP_REVIEW_TOKEN", help="require this token on every request"
    ),
    registry: Path | None = typer.Option(None, "--registry", help=REGISTRY_HELP),
    tasks: list[Path] = typer.Option([], "--tasks", help="task files for samples whose run does not list them"),
    size: int = typer.Option(50, "--size", min=1, help="samples in the queue"),
    seed: int = typer.Option(0, "--seed", help="seed of the queue's draw"),
    stratify_by: str = typer.Option(
        "domain,verifier_kind,outcome", "--stratify-by", help="comma-separated keys: domain, verifier_kind, outcome"
    ),
    per_stratum: int | None = typer.Option(None, "--per-stratum", min=1, help="most samples from one stratum"),
    reviewer: str | None = typer.Option(None, "--reviewer", help="default reviewer name shown in the page"),
) -> int:
    """Serve the review queue of the given runs at http://HOST:PORT (opens no browser).

    The queue is a seeded stratified draw, suspicious samples first; each sample shows why it was
    picked. Keys: j/k move, 1-4 judge, n note, g gold, t turns, q queue, s figures.
    """
    import getpass
    import signal
    import sys

    import uvicorn

    from veriloop.core import UserError
    from veriloop.review import SamplerConfig, build_queue, create_review_app, load_sources
    from veriloop.sandbox import is_loopback

    if token is None and not is_loopback(host):
        raise UserError(f"refusing to listen on {host} without --token: anyone who can reach it could read and judge")
    if token is not None and not token.strip():
        raise UserError("--token is empty")
    from rich.console import Console

    config = SamplerConfig(size=size, seed=seed, stratify_by=_stratify(stratify_by), per_stratum=per_stratum)
    with Console(stderr=True).status(f"reading {len(runs)} runs and drawing the queue"):
        samples = load_sources(runs, tasks)
        queue = build_queue(samples, config)
    path = _registry(runs, registry)
    description = f"seed {seed}, strata by {', '.join(config.stratify_by) or 'nothing'}, {len(samples)} samples"
    app_ = create_review_app(
        queue, path, token=token, default_reviewer=reviewer or getpass.getuser(), description=description
    )
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    link = f"http://{host}:{port}/" + (f"?token={token}" if token else "")
    typer.echo(f"reviewing {len(queue)} of {len(samples)} samples at {link} (judgments go to {path})", err=True)
    uvicorn.run(app_, host=host, port=port, log_level="warning", access_log=False)
    return 0


@app.command("stats")
def stats(
    runs: list[Path] = typer.Argument(..., help=RUNS_HELP),
    registry: Path | None = typer.Option(None, "--registry", help=REGISTRY_HELP),
) -> int:
    """Print verifier-human agreement of the runs' judgments as JSON: per domain and per verifier
    kind, with false-pass and false-fail rates and 95% Wilson intervals."""
    from veriloop.evaluation import agreement

    typer.echo(agreement(_latest(runs, registry)).model_dump_json(indent=2))
    return 0


@app.command("export")
def export(
    runs: list[Path] = typer.Argument(..., help=RUNS_HELP),
    out: Path = typer.Option(
        ..., "--out", help="regression file (TASKS.regressions.jsonl beside a task file is replayed by every audit)"
    ),
    registry: Path | None = typer.Option(None, "--registry", help=REGISTRY_HELP),
) -> int:
    """Add every "should have failed (hack)" judgment of the runs to a regression file that
    `veriloop audit` replays against the current verifier."""
    from veriloop.review import export_hacks

    added, total = export_hacks(_latest(runs, registry), out)
    typer.echo(f"added {added} reviewed hacks to {out} ({total} in the file)", err=True)
    return 0
