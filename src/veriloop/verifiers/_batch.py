"""Scoring many responses at once: ``verify_many``, concurrent and order-preserving.

A verifier kind may register a batch check (``register_batch_check``): a plain callable
taking many ``(config, task, response_text)`` items and returning one Verdict or grader
exception per item. Code kinds use it to share process starts across responses; the
``judge`` kind registers with ``whole_groups``, so a task's responses reach it in one batch
(its ``rank`` mode scores them relative to each other). Kinds without one are checked one
response at a time with ``verify``. Either way every response
gets exactly one Score, in input order, and a broken grader is an ``infra_error``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

from pydantic import ValidationError

from veriloop.core import Registry, Response, Score, Task
from veriloop.verifiers._registry import VERIFIERS, Verdict, answer_of, score_of, verify

BatchCheck = Callable[[Sequence[tuple[Any, Task, str]]], list[Verdict | Exception]]

BATCH_CHECKS: Registry[BatchCheck] = Registry("batch check")

_WHOLE_GROUPS: set[str] = set()  # kinds whose batches never split the responses to one task


def register_batch_check(name: str, whole_groups: bool = False) -> Callable[[BatchCheck], BatchCheck]:
    """Decorator registering the batch form of verifier kind ``name``'s check; with
    ``whole_groups`` every batch holds all of a task's responses or none of them (a batch may
    then hold one group larger than ``batch_size``)."""
    if whole_groups:
        _WHOLE_GROUPS.add(name)
    return BATCH_CHECKS.register(name)


def _check_batch(indices: list[int], pairs: Sequence[tuple[Task, Response]]) -> list[tuple[int, Score]]:
    kind = VERIFIERS.get(pairs[indices[0]][0].verifier_kind)
    scored: list[tuple[int, Score]] = []
    items, item_indices = [], []
    for index in indices:
        task, response = pairs[index]
        try:
            items.append((kind.parse_config(task.verifier), task, answer_of(response)))
            item_indices.append(index)
        except ValidationError as exc:
            scored.append((index, score_of(kind.name, task, response, exc)))
    try:
        outcomes: list[Verdict | Exception] = BATCH_CHECKS.get(kind.name)(items)
    except Exception as exc:  # the grader broke: every item of the batch is an infra error
        outcomes = [exc] * len(items)
    for index, outcome in zip(item_indices, outcomes):
        task, response = pairs[index]
        scored.append((index, score_of(kind.name, task, response, outcome)))
    return scored


def _units(pairs: Sequence[tuple[Task, Response]], batch_size: int) -> list[list[int]]:
    """Index groups: batches of one batchable kind, and single responses of other kinds."""
    batched: dict[str, list[int]] = {}
    units: list[list[int]] = []
    for index, (task, _) in enumerate(pairs):
        if task.verifier_kind in BATCH_CHECKS:
            batched.setdefault(task.verifier_kind, []).append(index)
        else:
            units.append([index])
    for kind, indices in batched.items():
        if kind in _WHOLE_GROUPS:
            units += _whole_groups(indices, pairs, batch_size)
        else:
            units += [indices[i : i + batch_size] for i in range(0, len(indices), batch_size)]
    return units


def _whole_groups(indices: list[int], pairs: Sequence[tuple[Task, Response]], batch_size: int) -> list[list[int]]:
    """``indices`` in batches of whole task groups (in order of each task's first response), of at
    most ``batch_size`` responses, save a group larger than that, which is a batch alone."""
    groups: dict[str, list[int]] = {}
    for index in indices:
        groups.setdefault(pairs[index][0].id, []).append(index)
    units: list[list[int]] = [[]]
    for group in groups.values():
        if units[-1] and len(units[-1]) + len(group) > batch_size:
            units.append([])
        units[-1] += group
    return [unit for unit in units if unit]


def verify_many(
    pairs: Sequence[tuple[Task, Response]],
    *,
    threads: int = 4,
    batch_size: int = 16,
    on_score: Callable[[Score], None] | None = None,
) -> list[Score]:
    """One Score per ``(task, response)``, in order; ``on_score`` is called as each is ready.

    ``threads`` checks (or batches) run at once; code verifiers share the sandbox workers
    set by ``set_code_workers``.
    """
    scores: list[Score | None] = [None] * len(pairs)
    with ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix="verify") as pool:
        futures = []
        for unit in _units(pairs, batch_size):
            if len(unit) == 1 and pairs[unit[0]][0].verifier_kind not in BATCH_CHECKS:
                task, response = pairs[unit[0]]
                futures.append(pool.submit(lambda i=unit[0], t=task, r=response: [(i, verify(t, r))]))
            else:
                futures.append(pool.submit(_check_batch, unit, pairs))
        for future in as_completed(futures):
            for index, score in future.result():
                scores[index] = score
                if on_score is not None:
                    on_score(score)
    return [score for score in scores if score is not None]
