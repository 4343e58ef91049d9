"""What can be reviewed: the samples of eval runs and the trajectories of training runs.

``load_sources`` reads each path given to ``veriloop review``: an eval directory
(``samples.parquet``), a trajectory store (``part-*.parquet``) or a training run directory
(its ``trajectories/`` store). Each sample becomes a ``ReviewSample`` that carries everything the
review screen shows: the task (prompt, verifier config, gold) when its task file can be found
(an eval's ``eval.json`` lists them; ``--tasks`` adds more), the answer or the whole episode,
and the verdict. A sample's ``checkpoint`` orders runs for the flip signal: an eval run's
position on the command line, a trajectory's policy version.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from veriloop.core import Record, Task, Trajectory, UserError
from veriloop.evaluation import EvalSample, Judgment, load_run, verifier_version
from veriloop.evaluation import SAMPLES_FILE, load_run_tasks
from veriloop.tasks import load_tasks, question_text

TRAJECTORIES_DIR = "trajectories"


class ReviewTurn(Record):
    """One step of a multi-turn episode as the review screen shows it."""

    role: Literal["assistant", "observation"]
    text: str
    tool: str | None = None


class ReviewSample(Record):
    """One verdict to review, with what a person needs to judge it."""

    run: str = Field(description="resolved path of the run the sample came from")
    run_label: str
    sample_id: str = Field(description="unique within its run: TASK#INDEX for evals, the trajectory id for stores")
    checkpoint: int = Field(description="orders the runs: position of an eval run, or the policy version")
    task_id: str
    domain: str
    verifier_kind: str = "unknown"
    verifier: dict[str, Any] | None = Field(default=None, description="the task's verifier config, when known")
    verifier_version: str
    gold: Any = None
    has_task: bool = Field(default=False, description="whether the task record was found")
    prompt: str
    response: str
    turns: tuple[ReviewTurn, ...] = ()
    reward: float | None
    passed: bool
    status: Literal["scored", "infra_error"]
    detail: str = ""
    feedback: str = ""
    images: dict[str, str] = Field(default_factory=dict, description="the verifier's pictures, name -> base64 PNG")

    @property
    def key(self) -> str:
        return f"{self.run}::{self.sample_id}"

    def judgment(self, verdict: str, note: str, reviewer: str) -> Judgment:
        """A reviewer's verdict on this sample, as the run registry stores it."""
        return Judgment(
            run=self.run,
            sample_id=self.sample_id,
            task_id=self.task_id,
            domain=self.domain,
            verifier_kind=self.verifier_kind,
            verifier_version=self.verifier_version,
            verifier_passed=self.passed,
            verdict=verdict,
            note=note,
            reviewer=reviewer,
            response=self.response,
        )


def _with_task(fields: dict[str, Any], task: Task | None) -> dict[str, Any]:
    verifier = task.verifier if task is not None else None
    return {
        **fields,
        "verifier_kind": task.verifier_kind if task is not None else "unknown",
        "verifier": verifier,
        "verifier_version": verifier_version(verifier),
        "gold": task.gold if task is not None else None,
        "has_task": task is not None,
    }


def _eval_samples(path: Path, position: int, extra: dict[str, Task]) -> list[ReviewSample]:
    run = load_run(path)
    tasks = load_run_tasks(run) | extra
    resolved = str(path.resolve())
    rows = []
    for sample in run.samples:
        rows.append(
            ReviewSample(**_with_task(_eval_fields(sample, resolved, run.label, position), tasks.get(sample.task_id)))
        )
    return rows


def _eval_fields(sample: EvalSample, run: str, label: str, position: int) -> dict[str, Any]:
    return {
        "run": run,
        "run_label": label,
        "sample_id": f"{sample.task_id}#{sample.sample_index}",
        "checkpoint": position,
        "task_id": sample.task_id,
        "domain": sample.domain,
        "prompt": sample.prompt,
        "response": sample.response,
        "turns": tuple(ReviewTurn(role=t["role"], text=t["text"], tool=t["tool"] or None) for t in sample.episode),
        "reward": sample.reward,
        "passed": sample.passed,
        "status": sample.status,
        "detail": sample.detail,
        "feedback": sample.feedback,
        "images": sample.images,
    }


def _trajectory_fields(trajectory: Trajectory, run: str, label: str, task: Task | None) -> dict[str, Any]:
    score = trajectory.score
    infra = score is None or score.status == "infra_error"
    if task is not None:
        prompt = question_text(task)
    else:
        users = [m.content for m in trajectory.prompt if m.role == "user"]
        prompt = users[-1] if users else ""
    return {
        "run": run,
        "run_label": label,
        "sample_id": trajectory.id,
        "checkpoint": trajectory.policy_version,
        "task_id": trajectory.task_id,
        "domain": trajectory.domain,
        "prompt": prompt,
        "response": trajectory.response,
        "turns": tuple(ReviewTurn(role=t.role, text=t.text, tool=t.tool) for t in trajectory.turns),
        "reward": None if infra else trajectory.reward,
        "passed": bool(not infra and score.passed),
        "status": "infra_error" if infra else "scored",
        "detail": score.detail if score is not None else "no score was recorded",
        "feedback": score.feedback if score is not None else "",
        "images": score.images if score is not None else {},
    }


def _store_samples(path: Path, extra: dict[str, Task]) -> list[ReviewSample]:
    from veriloop.rollout import TrajectoryStore  # the rollout layer loads torch: only for stores

    store = TrajectoryStore(path)
    resolved = str(path.resolve())
    label = path.parent.name if path.name == TRAJECTORIES_DIR else path.name
    return [
        ReviewSample(**_with_task(_trajectory_fields(t, resolved, label, extra.get(t.task_id)), extra.get(t.task_id)))
        for t in store
    ]


def _is_store(path: Path) -> bool:
    """Whether ``path`` holds trajectory store parts (``part-*.parquet``)."""
    return path.is_dir() and any(path.glob("part-*.parquet"))


def resolve_run(item: str | os.PathLike[str]) -> Path:
    """The directory a path given to ``veriloop review`` stands for: an eval run, a trajectory
    store, or the store of a training run; a UserError for anything else."""
    path = Path(item)
    if (path / SAMPLES_FILE).is_file() or _is_store(path):
        return path
    if _is_store(path / TRAJECTORIES_DIR):
        return path / TRAJECTORIES_DIR
    if not path.is_dir():
        raise UserError(f"{path}: no such directory")
    raise UserError(
        f"{path}: neither an eval run ({SAMPLES_FILE}) nor a trajectory store (part-*.parquet, "
        f"or {TRAJECTORIES_DIR}/ of a training run)"
    )


def load_sources(
    paths: Sequence[str | os.PathLike[str]], task_files: Sequence[str | os.PathLike[str]] = ()
) -> list[ReviewSample]:
    """Every sample of the given runs, in the order given; a path that is none of the three
    kinds, or a run with nothing in it, is a UserError naming the path."""
    if not paths:
        raise UserError("give at least one eval run, trajectory store or training run directory")
    extra: dict[str, Task] = {}
    for file in task_files:
        extra |= {task.id: task for task in load_tasks(file)}
    samples: list[ReviewSample] = []
    seen: set[Path] = set()
    for position, item in enumerate(paths):
        path = resolve_run(item)
        if path.resolve() in seen:
            raise UserError(f"{item}: given twice")
        seen.add(path.resolve())
        found = _eval_samples(path, position, extra) if (path / SAMPLES_FILE).is_file() else _store_samples(path, extra)
        if not found:
            raise UserError(f"{item}: holds no samples to review")
        samples += found
    return samples
