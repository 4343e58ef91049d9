"""Reading and checking task sets: every line is checked and every problem is reported."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field

from pydantic import ValidationError

from veriloop.core import (
    Response,
    RowErrors,
    Task,
    UnknownNameError,
    UserError,
    WorkspaceError,
    describe_validation_error,
    iter_objects,
)
from veriloop.verifiers import VERIFIERS, task_problem


@dataclass(frozen=True)
class TaskSetCheck:
    """The outcome of checking one task file: the good tasks and one message per problem."""

    path: str
    tasks: tuple[Task, ...]
    errors: tuple[str, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return not self.errors

    def domain_counts(self) -> dict[str, int]:
        return dict(sorted(Counter(task.domain for task in self.tasks).items()))


def check_task(task: Task) -> str | None:
    """The problem with a task's verifier (unknown kind or bad fields), or None."""
    try:
        kind = VERIFIERS.get(task.verifier_kind)
    except UnknownNameError as exc:
        return str(exc)
    try:
        config = kind.parse_config(task.verifier)
    except ValidationError as exc:
        return f"{task.verifier_kind} verifier: {describe_validation_error(exc, 'verifier.')}"
    problem = task_problem(kind, config, task)
    return f"{task.verifier_kind} verifier: {problem}" if problem else None


def _placed_workspace(task: Task, base: str) -> tuple[Task, str | None]:
    """``task`` with a workspace directory or archive named relative to its file made absolute,
    and the problem with that workspace (a missing path, a link, too many files), if any."""
    if not isinstance(task.workspace, str):
        return task, None
    placed = task.model_copy(update={"workspace": os.path.join(base, os.path.expanduser(task.workspace))})
    try:
        placed.workspace_files()
    except WorkspaceError as exc:
        return task, str(exc)
    return placed, None


def gold_answer(task: Task) -> Response:
    """The task's gold as a response: its text, or for a gold ``{"workspace": {path: text}}``
    (the files a reference fix changes) the initial workspace with those files written over it."""
    from veriloop.verifiers import gold_response, gold_workspace

    workspace = gold_workspace(task)
    if workspace is not None:
        return Response(id=task.id, task_id=task.id, response="", workspace=workspace)
    return Response(id=task.id, task_id=task.id, response=gold_response(task) or "")


def _environment_packages(tasks: list[Task]) -> tuple[str, ...]:
    """The packages the generators of ``tasks`` say their environment must hold."""
    from veriloop.tasks._sources import GENERATORS

    generators = sorted({str(task.metadata.get("generator")) for task in tasks} & set(GENERATORS.names()))
    return tuple(dict.fromkeys(p for name in generators for p in GENERATORS.get(name).environment_packages))


def unbuilt_environments(tasks: list[Task]) -> dict[str, str]:
    """``{environment: why it cannot be used}`` for each environment ``tasks`` name that is not built,
    the message naming the build command with the packages the tasks' generator needs."""
    from veriloop.sandbox import load_environment

    problems = {}
    for name in sorted({task.environment for task in tasks if task.environment}):
        try:
            load_environment(name, _environment_packages([t for t in tasks if t.environment == name]))
        except UserError as exc:
            problems[name] = str(exc)
    return problems


def run_failures(path: str | os.PathLike[str], tasks: list[tuple[int, Task]]) -> list[str]:
    """``FILE: line N: KIND verifier: ...`` for each ``(line, task)`` whose verifier finds a problem
    only by running the task's code in the sandbox (``veriloop.verifiers.run_problems``); tasks on
    an environment that is not built are left to ``gold_failures``, which names it."""
    from veriloop.verifiers import run_problems

    unbuilt = unbuilt_environments([task for _, task in tasks])
    runnable = [(line, task) for line, task in tasks if task.environment not in unbuilt]
    problems = run_problems([task for _, task in runnable])
    return [f"{path}: line {line}: {problem}" for (line, _), problem in zip(runnable, problems) if problem]


def gold_failures(path: str | os.PathLike[str], tasks: list[tuple[int, Task]]) -> list[str]:
    """``FILE: line N: gold answer fails its verifier: ...`` for each ``(line, task)`` whose
    gold answer does not pass (an infra error counts: the gold could not be checked), or
    ``FILE: line N: gold answer not checked: ...`` when the environment it runs on is not built."""
    from veriloop.verifiers import code_workers, verify_many

    with_gold = [(line, task) for line, task in tasks if task.gold is not None]
    unbuilt = unbuilt_environments([task for _, task in with_gold])
    missing = [
        f"{path}: line {line}: gold answer not checked: {unbuilt[task.environment]}"
        for line, task in with_gold
        if task.environment in unbuilt
    ]
    with_gold = [(line, task) for line, task in with_gold if task.environment not in unbuilt]
    pairs = [(task, gold_answer(task)) for _, task in with_gold]
    scores = verify_many(pairs, threads=2 * code_workers())
    return missing + [
        f"{path}: line {line}: gold answer fails its verifier: {score.detail}"
        for (line, _), score in zip(with_gold, scores)
        if not score.passed
    ]


def check_task_file(path: str | os.PathLike[str], gold: bool = False) -> TaskSetCheck:
    """Check every row of a JSONL/Parquet task file: JSON, schema, unique ids, verifier kind,
    and with ``gold=True`` that every gold answer passes its own verifier."""
    tasks: list[Task] = []
    errors: list[str] = []
    first_line: dict[str, int] = {}
    for number, obj, error in iter_objects(path):
        where = f"{path}: line {number}"
        if error is not None:
            errors.append(f"{where}: {error}")
            continue
        try:
            task = Task.model_validate(obj)
        except ValidationError as exc:
            errors.append(f"{where}: {describe_validation_error(exc)}")
            continue
        if task.id in first_line:
            errors.append(f"{where}: duplicate id {task.id!r} (first on line {first_line[task.id]})")
            continue
        first_line[task.id] = number
        task, problem = _placed_workspace(task, os.path.dirname(os.path.abspath(path)))
        problem = problem or check_task(task)
        if problem is not None:
            errors.append(f"{where}: {problem}")
            continue
        tasks.append(task)
    if not tasks and not errors:
        errors.append(f"{path}: holds no tasks")
    if gold:
        errors += run_failures(path, [(first_line[task.id], task) for task in tasks])
        errors += gold_failures(path, [(first_line[task.id], task) for task in tasks])
    return TaskSetCheck(path=str(path), tasks=tuple(tasks), errors=tuple(errors))


def load_tasks(path: str | os.PathLike[str]) -> list[Task]:
    """Load a task set, raising RowErrors (a UserError) listing every bad row."""
    result = check_task_file(path)
    if result.errors:
        raise RowErrors(result.errors)
    return list(result.tasks)
