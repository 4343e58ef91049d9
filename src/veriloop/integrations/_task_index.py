"""Looking up tasks by id for the trainer integrations."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from veriloop.core import Task, UserError


def index_tasks(tasks: str | os.PathLike[str] | Iterable[Task] | Mapping[str, Task]) -> dict[str, Task]:
    """Tasks by id, from a task file path, an iterable of tasks, or a mapping already keyed by id."""
    if isinstance(tasks, (str, os.PathLike)):
        from veriloop.tasks import load_tasks

        tasks = load_tasks(tasks)
    if isinstance(tasks, Mapping):
        return dict(tasks)
    index: dict[str, Task] = {}
    for task in tasks:
        if task.id in index:
            raise UserError(f"duplicate task id {task.id!r}")
        index[task.id] = task
    return index
