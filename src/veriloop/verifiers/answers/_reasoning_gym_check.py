"""The reasoning-gym check itself; runs inside a killable check process (see ``_reasoning_gym.py``).

The dataset entry is rebuilt from (name, config, seed, size, index) rather than read from the
task file: entries hold Python objects (tuples, boards) that do not survive JSON, and the
rebuilt question is compared with the task's prompt so that a task set built by another
reasoning-gym version fails loudly instead of being scored against a different puzzle.
"""

from __future__ import annotations

import functools
import json
import math
from typing import Any


@functools.lru_cache(maxsize=64)
def _dataset(name: str, config_json: str, seed: int, size: int) -> Any:
    import reasoning_gym

    return reasoning_gym.create_dataset(name, seed=seed, size=size, **json.loads(config_json))


@functools.lru_cache(maxsize=4096)
def _entry(name: str, config_json: str, seed: int, size: int, index: int) -> dict[str, Any]:
    return _dataset(name, config_json, seed, size)[index]


def entry_for(name: str, config: dict[str, Any], seed: int, size: int, index: int) -> dict[str, Any]:
    """The dataset entry (question, answer, metadata) behind one reasoning-gym task."""
    return _entry(name, json.dumps(config, sort_keys=True), seed, size, index)


def score_reasoning_gym_answer(request: dict[str, Any]) -> dict[str, Any]:
    """``{"score": float}`` from the dataset's own scorer for ``request["answer"]``."""
    name, config = request["dataset"], request.get("config", {})
    seed, size, index = request["seed"], request["size"], request["index"]
    entry = entry_for(name, config, seed, size, index)
    prompt = request.get("prompt")
    if prompt is not None and entry["question"].strip() not in prompt:
        raise ValueError(
            f"reasoning-gym built a different question for {name} seed {seed} index {index}; "
            "the installed reasoning-gym differs from the one that built this task set"
        )
    score = _dataset(name, json.dumps(config, sort_keys=True), seed, size).score_answer(request["answer"], entry)
    score = float(score)
    if not math.isfinite(score):
        raise ValueError(f"{name} scorer returned {score}")
    return {"score": min(1.0, max(0.0, score))}
