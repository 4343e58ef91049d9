"""The per-sample rows of an eval run, and reading a finished run back.

An eval directory holds ``samples.parquet`` (one ``EvalSample`` per sample, task order),
``summary.json``, ``eval.json`` (the settings, used to resume) and, while it runs,
``parts/part-NNNNN.parquet`` (one per chunk of tasks, written atomically).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError

from veriloop.core import Record, RowErrors, Task, UserError, describe_validation_error, read_parquet_rows
from veriloop.tasks import load_tasks

SAMPLES_FILE = "samples.parquet"
"""The file of an eval run's directory that holds its scored samples (one EvalSample a row)."""
SUMMARY_FILE = "summary.json"
SETTINGS_FILE = "eval.json"


class EvalSample(Record):
    """One sampled answer to one task, as scored."""

    task_id: str
    domain: str
    sample_index: int = Field(ge=0)
    prompt: str = Field(default="", description="the task's question (its last user message)")
    response: str = Field(default="", description="the final answer that was verified")
    reward: float | None = None
    passed: bool = False
    status: Literal["scored", "infra_error"] = "scored"
    detail: str = ""
    feedback: str = ""
    images: dict[str, str] = Field(default_factory=dict, description="the verifier's pictures, name -> base64 PNG")
    stop_reason: str = "done"
    completion_tokens: int = Field(default=0, ge=0, description="generated tokens (0 when the engine reports none)")
    turns: int = Field(default=1, ge=0, description="model turns in the episode")
    turn_texts: tuple[str, ...] = Field(
        default=(), description="the text of each model turn, as its verifier received them (for replays)"
    )
    episode: tuple[dict[str, str], ...] = Field(
        default=(),
        description="every turn of a multi-turn episode ({role, text, tool}: model turns and tool observations)",
    )
    generate_s: float = Field(default=0.0, ge=0)
    verify_s: float = Field(default=0.0, ge=0)
    chunk: int = Field(default=0, ge=0, description="the part file the sample was written in")
    chunk_wall_s: float = Field(default=0.0, ge=0, description="wall-clock seconds of its whole chunk")
    trajectory_id: str = Field(default="", description="the episode's id (veriloop replay takes it)")
    scene: str = Field(default="", description="sha256 of the final workspace kept in OUT/scenes (workspace episodes)")
    environment: str = Field(default="", description="hash of the environment its tools and verifier ran in")
    context_tokens_max: int = Field(default=0, ge=0, description="most tokens in the model's context at a turn's start")
    context_tokens_sum: int = Field(default=0, ge=0, description="context tokens at each turn's start, summed")
    truncations: int = Field(default=0, ge=0, description="observations cut to fit the context budget")
    drops: int = Field(default=0, ge=0, description="older observations dropped to fit the context budget")


def read_samples(path: str | os.PathLike[str]) -> list[EvalSample]:
    """Every row of a samples Parquet file; RowErrors naming each bad row."""
    samples, errors = [], []
    for number, row in enumerate(read_parquet_rows(path), start=1):
        try:
            samples.append(EvalSample.model_validate(row))
        except ValidationError as exc:
            errors.append(f"{path}: line {number}: {describe_validation_error(exc)}")
    if errors:
        raise RowErrors(errors)
    return samples


def task_counts(samples: Iterable[EvalSample]) -> dict[str, tuple[int, int]]:
    """``task_id -> (scored samples, passed samples)``; infra errors are set aside."""
    counts: dict[str, list[int]] = {}
    for sample in samples:
        entry = counts.setdefault(sample.task_id, [0, 0])
        if sample.status == "scored":
            entry[0] += 1
            entry[1] += int(sample.passed)
    return {task_id: (n, c) for task_id, (n, c) in counts.items()}


@dataclass(frozen=True)
class EvalRun:
    """A finished eval run read back from its directory."""

    path: Path
    summary: dict[str, Any]
    samples: tuple[EvalSample, ...]

    @property
    def label(self) -> str:
        return self.path.name or str(self.path)


def load_run(path: str | os.PathLike[str]) -> EvalRun:
    """Read an eval directory (``samples.parquet`` and, when present, ``summary.json``)."""
    directory = Path(path)
    if not directory.is_dir():
        raise UserError(f"{directory}: no such eval directory")
    samples_path = directory / SAMPLES_FILE
    if not samples_path.is_file():
        raise UserError(
            f"{directory}: not a finished eval run (no {SAMPLES_FILE}); run or resume 'veriloop eval' first"
        )
    summary: dict[str, Any] = {}
    summary_path = directory / SUMMARY_FILE
    if summary_path.is_file():
        try:
            summary = json.loads(summary_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise UserError(f"{summary_path}: malformed JSON: {exc.msg} (line {exc.lineno})") from None
    return EvalRun(directory, summary, tuple(read_samples(samples_path)))


def run_task_files(directory: str | os.PathLike[str]) -> list[str]:
    """The task files an eval directory's ``eval.json`` lists, as they were given to the eval
    (a relative path is relative to where it ran); [] when that file is missing or unreadable."""
    try:
        settings = json.loads((Path(directory) / SETTINGS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    files = settings.get("task_files", []) if isinstance(settings, dict) else []
    return [str(file) for file in files]


def load_run_tasks(run: EvalRun) -> dict[str, Task]:
    """The run's tasks by id, from its task files (``run_task_files``). A file that is gone or no
    longer loads is left out, so its tasks are missing here: never an error."""
    tasks: dict[str, Task] = {}
    for file in run_task_files(run.path):
        try:
            tasks |= {task.id: task for task in load_tasks(file)}
        except UserError:
            continue
    return tasks
