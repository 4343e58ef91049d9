"""Failures as data: the tasks a model did not always solve, with what the verifier said."""

from __future__ import annotations

import os
from collections.abc import Sequence

from veriloop.core import Task, write_records
from veriloop.evaluation._samples import EvalSample, task_counts


def failed_tasks(tasks: Sequence[Task], samples: Sequence[EvalSample], model: str = "") -> list[Task]:
    """Tasks with at least one scored sample that failed, in task order.

    Each keeps its fields and gains ``metadata["eval_failure"]``: the model, the pass rate over
    scored samples, and the first failing response with its verifier detail and feedback.
    Tasks whose samples all hit infra errors are left out (the grader, not the model, failed).
    """
    counts = task_counts(samples)
    first_failure: dict[str, EvalSample] = {}
    for sample in samples:
        if sample.status == "scored" and not sample.passed:
            first_failure.setdefault(sample.task_id, sample)
    exported = []
    for task in tasks:
        failure = first_failure.get(task.id)
        if failure is None:
            continue
        scored, passed = counts[task.id]
        record = {
            "model": model,
            "pass_rate": round(passed / scored, 6),
            "samples": scored,
            "response": failure.response,
            "detail": failure.detail,
            "feedback": failure.feedback,
        }
        if failure.scene:  # its final workspace, in the eval's scenes/ (veriloop replay restores it)
            record |= {"trajectory_id": failure.trajectory_id, "scene": failure.scene}
        exported.append(task.model_copy(update={"metadata": {**task.metadata, "eval_failure": record}}))
    return exported


def export_failures(
    path: str | os.PathLike[str], tasks: Sequence[Task], samples: Sequence[EvalSample], model: str = ""
) -> int:
    """Write ``failed_tasks`` as a task set (JSONL or Parquet by suffix); returns how many."""
    return write_records(path, failed_tasks(tasks, samples, model))
