"""The reasoning-gym check itself; runs in an isolated check process (see ``_reasoning_gym.py``).

The dataset entry is rebuilt from (name, config, seed, size, index) rather than read from the
task file: entries hold Python objects (tuples, boards) that do not survive JSON, and the
rebuilt question is compared with the task's prompt so that a task set built by another
reasoning-gym version fails loudly instead of being scored against a different puzzle.

The process is a fork template (``_check_process``'s fork mode, in the sandbox's isolated process):
``prepare`` runs in the template and builds and caches the entry from the request's trusted
fields only (never the answer), and scores the gold answer once per dataset so that the
scorer's lazy imports and caches are warm; ``score_reasoning_gym_answer`` runs in the child
forked for one check. Before a scorer that parses answers as expressions sees one, its guard
(``_reasoning_gym_guards``) must accept it as data (a refused answer scores 0), and scorers
that ``eval`` answers run with an ``eval`` that reads literals only.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
from typing import Any

import reasoning_gym

from veriloop.verifiers.answers._reasoning_gym_guards import guard_problem, literals_only


@functools.lru_cache(maxsize=64)
def _dataset(name: str, config_json: str, seed: int, size: int) -> Any:
    return reasoning_gym.create_dataset(name, seed=seed, size=size, **json.loads(config_json))


@functools.lru_cache(maxsize=4096)
def _entry(name: str, config_json: str, seed: int, size: int, index: int) -> dict[str, Any]:
    return _dataset(name, config_json, seed, size)[index]


_WARMED: set[tuple[str, str, int, int]] = set()


def _warm_scorer(name: str, config_json: str, seed: int, size: int, entry: dict[str, Any]) -> None:
    """Score the gold answer once per draw, so lazy imports and caches are built before any fork."""
    if (name, config_json, seed, size) in _WARMED or entry.get("answer") is None:
        return
    _WARMED.add((name, config_json, seed, size))
    _dataset(name, config_json, seed, size).score_answer(str(entry["answer"]), entry)


def entry_for(name: str, config: dict[str, Any], seed: int, size: int, index: int) -> dict[str, Any]:
    """The dataset entry (question, answer, metadata) behind one reasoning-gym task."""
    return _entry(name, json.dumps(config, sort_keys=True), seed, size, index)


def _key(request: dict[str, Any]) -> tuple[str, str, int, int, int]:
    config_json = json.dumps(request.get("config", {}), sort_keys=True)
    return request["dataset"], config_json, request["seed"], request["size"], request["index"]


def prepare(request: dict[str, Any]) -> None:
    """Build (and cache) the entry and check its question; reads no field but the draw and the prompt."""
    name, config_json, seed, size, index = _key(request)
    entry = _entry(name, config_json, seed, size, index)
    prompt = request.get("prompt")
    if prompt is not None and entry["question"].strip() not in prompt:
        raise ValueError(
            f"reasoning-gym built a different question for {name} seed {seed} index {index}; "
            "the installed reasoning-gym differs from the one that built this task set"
        )
    _warm_scorer(name, config_json, seed, size, entry)


def score_reasoning_gym_answer(request: dict[str, Any]) -> dict[str, Any]:
    """``{"score": float}`` from the dataset's own scorer, or ``{"score": 0, "refused": why}``."""
    prepare(request)
    key = _key(request)
    entry = _entry(*key)
    guarded = request.get("guard", True)
    refused = guard_problem(key[0], request["answer"], entry) if guarded else None
    if refused is not None:
        return {"score": 0.0, "refused": refused}
    with literals_only(key[0]) if guarded else contextlib.nullcontext():
        score = float(_dataset(*key[:4]).score_answer(request["answer"], entry))
    if not math.isfinite(score):
        raise ValueError(f"{key[0]} scorer returned {score}")
    return {"score": min(1.0, max(0.0, score))}
