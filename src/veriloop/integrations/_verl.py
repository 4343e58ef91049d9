"""A verl reward function: ``compute_score(data_source, solution_str, ground_truth, extra_info=None)``.

Point verl at this file (``custom_reward_function.path`` = this file's path,
``custom_reward_function.name`` = ``compute_score``) or build one with ``make_compute_score``.

Which verifier scores a row:

1. ``extra_info["task_id"]`` names a task of the loaded task set (``make_compute_score(tasks)``,
   or the task file in the ``VERILOOP_TASKS`` environment variable for the module-level
   ``compute_score``): that task, verifier and gold included;
2. a ``ground_truth`` object with a ``verifier`` key: that verifier, with its ``gold``;
3. otherwise the verifier registered for the ``data_source`` (``verifiers``), else
   ``default_verifier`` (``math``), with ``ground_truth`` as the gold answer.

The result is a dict: ``score`` (verl's reward), ``passed`` and ``infra_error``. verl has no way
to skip a sample, so a grader failure scores ``infra_error_reward`` (0.0) with
``infra_error: True`` for the caller to count.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from veriloop.core import Response, Task
from veriloop.integrations._task_index import index_tasks

ComputeScore = Callable[..., dict[str, Any]]


def make_compute_score(
    tasks: str | os.PathLike[str] | Iterable[Task] | Mapping[str, Task] | None = None,
    verifiers: Mapping[str, Mapping[str, Any]] | None = None,
    default_verifier: Mapping[str, Any] | None = None,
    infra_error_reward: float = 0.0,
) -> ComputeScore:
    """A verl ``compute_score`` that scores with veriloop verifiers (see the module docstring)."""
    by_id = index_tasks(tasks) if tasks is not None else {}
    by_source = {source: dict(v) for source, v in (verifiers or {}).items()}
    fallback = dict(default_verifier or {"kind": "math"})

    def task_for(data_source: str, ground_truth: Any, extra_info: Mapping[str, Any] | None) -> Task:
        task_id = (extra_info or {}).get("task_id")
        if task_id is not None and str(task_id) in by_id:
            return by_id[str(task_id)]
        if isinstance(ground_truth, Mapping) and isinstance(ground_truth.get("verifier"), Mapping):
            verifier, gold = dict(ground_truth["verifier"]), ground_truth.get("gold")
        else:
            verifier, gold = by_source.get(data_source, fallback), ground_truth
        return Task(
            id=str(task_id or data_source or "verl"),
            domain=data_source or "verl",
            prompt="(verl)",
            verifier=verifier,
            gold=gold,
        )

    def compute_score(
        data_source: str, solution_str: str, ground_truth: Any, extra_info: Mapping[str, Any] | None = None, **_: Any
    ) -> dict[str, Any]:
        from veriloop.verifiers import verify

        task = task_for(data_source, ground_truth, extra_info)
        score = verify(task, Response(id=task.id, task_id=task.id, response=solution_str))
        infra_error = score.reward is None
        return {
            "score": infra_error_reward if infra_error else score.reward,
            "passed": score.passed,
            "infra_error": infra_error,
        }

    return compute_score


_DEFAULT: ComputeScore | None = None
_DEFAULT_LOCK = threading.Lock()


def compute_score(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: Mapping[str, Any] | None = None, **kwargs: Any
) -> dict[str, Any]:
    """verl's reward-function signature, with tasks from ``VERILOOP_TASKS`` when that is set."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = make_compute_score(os.environ.get("VERILOOP_TASKS") or None)
    return _DEFAULT(data_source, solution_str, ground_truth, extra_info, **kwargs)


def verl_rows(tasks: Iterable[Task]) -> list[dict[str, Any]]:
    """Rows in verl's RL data schema for ``tasks``; ``extra_info.task_id`` links each back to its task.

    Write them with ``veriloop.core.write_parquet``; the ``veriloop tasks import verl-parquet``
    importer reads them back.
    """
    return [
        {
            "data_source": task.domain,
            "prompt": task.messages(),
            "ability": task.domain,
            "reward_model": {"style": "rule", "ground_truth": task.gold},
            "extra_info": {"index": index, "task_id": task.id},
        }
        for index, task in enumerate(tasks)
    ]
