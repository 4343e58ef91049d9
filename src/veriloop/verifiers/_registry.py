"""The registry of verifier kinds and the one entry point that turns a response into a Score.

A verifier kind is a pydantic config model (the fields a task's ``verifier`` object may carry
besides ``kind``) and a plain ``check`` callable returning a ``Verdict``. ``verify`` wraps the
check: a broken grader becomes an ``infra_error`` score, never a reward of 0.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from veriloop.core import Registry, Response, Score, Task, inline_files
from veriloop.verifiers._memo import Memo

C = TypeVar("C", bound=BaseModel)


class VerifierConfig(BaseModel):
    """Base of every kind's config: frozen, unknown fields rejected (typos are errors)."""

    model_config = ConfigDict(frozen=True, extra="forbid")


@dataclass(frozen=True)
class Verdict:
    """What a check found. ``reward`` is in [0, 1] unless a kind documents otherwise;
    ``environment`` is the hash of the environment the check ran in, if any; ``images`` are
    pictures for people (name -> base64 PNG), which no reward depends on."""

    reward: float
    passed: bool
    detail: str = ""
    feedback: str = ""
    environment: str | None = None
    images: dict[str, str] = field(default_factory=dict)


class Answer(str):
    """The response text a check receives. ``workspace`` holds the response's final workspace
    (``{path: bytes}``) when it has one, ``turns`` the text of each model turn of its episode
    (empty for a single answer): the kinds that judge a workspace or every turn read them,
    every other kind sees only the text."""

    workspace: dict[str, bytes] | None = None
    turns: tuple[str, ...] = ()


def answer_of(response: Response) -> Answer:
    answer = Answer(response.response)
    if response.workspace is not None:
        answer.workspace = inline_files(response.workspace)
    answer.turns = response.turns
    return answer


class GraderError(Exception):
    """Raised by a check when the grader itself failed (not the answer): becomes infra_error."""


@dataclass(frozen=True)
class VerifierKind(Generic[C]):
    name: str
    config: type[C]
    check: Callable[[C, Task, str], Verdict]

    def parse_config(self, verifier: dict[str, Any]) -> C:
        """Validate a task's ``verifier`` object (``kind`` excluded); raises ValidationError.

        A valid object's config is kept (``_configs``): a task is checked when its file loads
        and again by every verification, and a code kind's validators parse and walk its code.
        Configs are frozen, so the same object may serve every check of equal fields."""
        fields = {k: v for k, v in verifier.items() if k != "kind"}
        try:
            key = (self.name, json.dumps(fields, sort_keys=True))
        except (TypeError, ValueError):  # not JSON data: validated each time
            return self.config.model_validate(fields)
        return _configs.get(key, lambda: self.config.model_validate(fields))


_configs: Memo[Any] = Memo()
"""Valid configs by kind name and canonical JSON of their fields (see ``parse_config``)."""

VERIFIERS: Registry[VerifierKind[Any]] = Registry("verifier kind")


def register_verifier(
    name: str, config: type[C]
) -> Callable[[Callable[[C, Task, str], Verdict]], Callable[[C, Task, str], Verdict]]:
    """Decorator registering ``check(config, task, response_text) -> Verdict`` under ``name``."""

    def add(check: Callable[[C, Task, str], Verdict]) -> Callable[[C, Task, str], Verdict]:
        VERIFIERS.add(name, VerifierKind(name=name, config=config, check=check))
        return check

    return add


TASK_CHECKS: Registry[Callable[[Any, Task], str | None]] = Registry("task check")
"""kind name -> ``check(config, task) -> problem or None``: what a kind finds wrong with a task
beyond its own fields (the gold it needs, what its code imports), run by ``tasks validate``."""


def register_task_check(name: str) -> Callable[[Callable[[Any, Task], str | None]], Callable[[Any, Task], str | None]]:
    """Decorator registering kind ``name``'s task check (see ``TASK_CHECKS``)."""
    return TASK_CHECKS.register(name)


RUN_CHECKS: Registry[Callable[[list[tuple[Any, Task]]], list[str | None]]] = Registry("run check")
"""kind name -> ``check([(config, task), ...]) -> [problem or None, ...]``: what a kind finds wrong
with tasks only by running their code in the sandbox (what python_tests' tests pass to the
function), batched over a task set. Run by ``tasks validate`` and ``tasks generate``, never when a
task set is merely loaded: loading stays free of the sandbox."""


def register_run_check(
    name: str,
) -> Callable[
    [Callable[[list[tuple[Any, Task]]], list[str | None]]], Callable[[list[tuple[Any, Task]]], list[str | None]]
]:
    """Decorator registering kind ``name``'s run check (see ``RUN_CHECKS``)."""
    return RUN_CHECKS.register(name)


def run_problems(tasks: Sequence[Task]) -> list[str | None]:
    """Each task's problem found by its kind's run check (see ``RUN_CHECKS``), worded as
    ``KIND verifier: ...``, or None; one batch per kind."""
    problems: list[str | None] = [None] * len(tasks)
    by_kind: dict[str, list[int]] = {}
    for index, task in enumerate(tasks):
        if task.verifier_kind in RUN_CHECKS:
            by_kind.setdefault(task.verifier_kind, []).append(index)
    for name, indices in by_kind.items():
        kind = VERIFIERS.get(name)
        pairs = [(kind.parse_config(tasks[i].verifier), tasks[i]) for i in indices]
        for index, problem in zip(indices, RUN_CHECKS.get(name)(pairs)):
            problems[index] = f"{name} verifier: {problem}" if problem else None
    return problems


def task_problem(kind: VerifierKind[Any], config: Any, task: Task) -> str | None:
    """What the task check registered for ``kind`` finds wrong with ``task`` (``config``: the task's
    verifier config, validated), as one line for the user; None when it finds nothing, or when
    the kind registers no task check."""
    if kind.name not in TASK_CHECKS.names():
        return None
    return TASK_CHECKS.get(kind.name)(config, task)


def verify(task: Task, response: Response) -> Score:
    """Score one response to one task. Grader failures are ``infra_error``; answers never raise."""
    kind = VERIFIERS.get(task.verifier_kind)
    try:
        config = kind.parse_config(task.verifier)
        verdict = kind.check(config, task, answer_of(response))
    except Exception as exc:  # the grader broke: report it apart from wrong answers
        return score_of(kind.name, task, response, exc)
    return score_of(kind.name, task, response, verdict)


def score_of(kind_name: str, task: Task, response: Response, outcome: Verdict | Exception) -> Score:
    """The Score for a check's outcome: a Verdict, or the exception of a grader that broke."""
    if isinstance(outcome, Exception):
        return Score(
            id=response.id,
            task_id=task.id,
            reward=None,
            passed=False,
            status="infra_error",
            detail=f"{kind_name} verifier failed: {type(outcome).__name__}: {outcome}",
        )
    return Score(
        id=response.id,
        task_id=task.id,
        reward=float(outcome.reward),
        passed=outcome.passed,
        detail=outcome.detail,
        feedback=outcome.feedback,
        environment=outcome.environment,
        images=outcome.images,
    )
