"""A verl reward function: ``compute_score(data_source, solution_str, ground_truth, extra_info=None)``.

Point verl at this file (``reward.custom_reward_function.path`` = this file's path,
``reward.custom_reward_function.name`` = ``compute_score`` in verl 0.9; top-level
``custom_reward_function`` in older releases) or build one with ``make_compute_score``.

Which verifier scores a row:

1. ``extra_info["task_id"]`` names a task of the loaded task set (``make_compute_score(tasks)``;
   for the module-level ``compute_score``, the task file given as the ``tasks`` reward kwarg —
   ``reward.custom_reward_function.reward_kwargs.tasks`` in verl's config — or in the ``VERILOOP_TASKS``
   environment variable): that task, verifier and gold included. A row naming a task that is
   not loaded is an infra error, never scored by a fallback verifier it was not written for;
2. a ``ground_truth`` object with a ``verifier`` key: that verifier, with its ``gold``;
3. otherwise the verifier registered for the ``data_source`` (``verifiers``), else
   ``default_verifier`` (``math``), with ``ground_truth`` as the gold answer.

``write_verl_parquet`` writes task sets in the layout verl's ``RLHFDataset`` reads (native
list and struct columns; ``veriloop tasks export-verl`` on the command line).

The result is a dict: ``score`` (verl's reward), ``passed`` and ``infra_error``. verl has no way
to skip a sample, so a grader failure scores ``infra_error_reward`` (0.0) with
``infra_error: True`` for the caller to count.
"""

from __future__ import annotations

import json
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

    def task_for(data_source: str, ground_truth: Any, extra_info: Mapping[str, Any] | None) -> Task | None:
        task_id = (extra_info or {}).get("task_id")
        if task_id is not None:
            return by_id.get(str(task_id))  # None: a veriloop row whose task set is not loaded
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
        if task is None:
            detail = (
                f"task {(extra_info or {}).get('task_id')!r} is not in the loaded task set: pass the task file "
                "as the 'tasks' reward kwarg or in VERILOOP_TASKS"
            )
            return {"score": infra_error_reward, "passed": False, "infra_error": True, "detail": detail}
        score = verify(task, Response(id=task.id, task_id=task.id, response=solution_str))
        infra_error = score.reward is None
        return {
            "score": infra_error_reward if infra_error else score.reward,
            "passed": score.passed,
            "infra_error": infra_error,
        }

    return compute_score


_BY_TASK_FILE: dict[str | None, ComputeScore] = {}
_DEFAULT_LOCK = threading.Lock()


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
    tasks: str | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """verl's reward-function signature; the task file comes from the ``tasks`` reward kwarg, else
    ``VERILOOP_TASKS``; each file is loaded once per process."""
    source = tasks or os.environ.get("VERILOOP_TASKS") or None
    with _DEFAULT_LOCK:
        if source not in _BY_TASK_FILE:
            _BY_TASK_FILE[source] = make_compute_score(source)
        scorer = _BY_TASK_FILE[source]
    return scorer(data_source, solution_str, ground_truth, extra_info, **kwargs)


def verl_rows(tasks: Iterable[Task]) -> list[dict[str, Any]]:
    """Rows in verl's RL data schema for ``tasks``; ``extra_info.task_id`` links each back to its task.

    Write them with ``write_verl_parquet`` (verl's layout); the ``veriloop tasks import
    verl-parquet`` importer reads them back. ``ground_truth`` is the gold as text (JSON for other
    values), so the column has one type.
    """
    return [
        {
            "data_source": task.domain,
            "prompt": task.messages(),
            "ability": task.domain,
            "reward_model": {"style": "rule", "ground_truth": _gold_text(task.gold)},
            "extra_info": {"index": index, "task_id": task.id},
        }
        for index, task in enumerate(tasks)
    ]


def _gold_text(gold: Any) -> str:
    if gold is None:
        return ""
    return gold if isinstance(gold, str) else json.dumps(gold)


def write_verl_parquet(path: str | os.PathLike[str], tasks: Iterable[Task]) -> int:
    """Write ``verl_rows(tasks)`` as verl's ``RLHFDataset`` reads them: ``prompt`` a list of
    ``{role, content}`` structs, ``reward_model`` and ``extra_info`` structs (not JSON text, which
    ``veriloop.core.write_parquet`` uses for nested columns). Written atomically; returns the row count."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from veriloop.core import atomic_write

    rows = verl_rows(tasks)
    table = pa.Table.from_pylist(rows)
    with atomic_write(path, "wb") as handle:
        pq.write_table(table, handle)
    return len(rows)
