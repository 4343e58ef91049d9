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

The template also probes the scorer with non-answers (``_commitment.non_answers``: the question
given back, a tautology, an empty answer, the question's numbers) on the draw's first
``PROBED_ENTRIES`` entries and on the task's own, once each; every reply says which of them
earned credit, if any, so the host can turn the scorer's partial credit off where it pays for
form rather than progress. (Some scorers pay a non-answer on few entries: knights_knaves on 2
of 40, so one entry alone is too few to judge a draw by.)

An exception the scorer raises while it reads an answer (garbage text, unbalanced brackets, a
value of the wrong type) is the answer's fault and scores 0 (``{"unparsable": why}``), once the
same scorer has read this entry's gold answer without raising; when the gold raises too, or
the exception is one of ``ENVIRONMENT_FAILURES`` (a package or file the scorer needs is
missing), the scorer is broken and the check fails as an infra error. A worker that dies is an
infra error as well (the pool reports it).
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
from typing import Any

import reasoning_gym

from veriloop.verifiers.answers._commitment import non_answers
from veriloop.verifiers.answers._reasoning_gym_guards import guard_problem, literals_only

PROBED_ENTRIES = 8
ENVIRONMENT_FAILURES = (ImportError, OSError)
"""Exceptions that say the scorer's environment is broken, whatever the answer."""


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


_NON_ANSWER_CREDIT: dict[tuple[str, str, int, int, int], str | None] = {}


def _guarded_score(name: str, dataset: Any, answer: str, entry: dict[str, Any]) -> float:
    """The scorer's score for ``answer`` behind its guard (a refused answer scores 0)."""
    if guard_problem(name, answer, entry) is not None:
        return 0.0
    with literals_only(name):
        return float(dataset.score_answer(answer, entry))


def _entry_credit(key: tuple[str, str, int, int, int]) -> str | None:
    """Which non-answer the scorer pays on one entry, e.g. ``"a tautology ('x = x') earned 0.01"`` (cached)."""
    if key not in _NON_ANSWER_CREDIT:
        _NON_ANSWER_CREDIT[key] = None
        dataset, entry = _dataset(*key[:4]), _entry(*key)
        for what, text in non_answers(entry["question"]):
            try:
                score = _guarded_score(key[0], dataset, text, entry)
            except Exception:  # a probe the scorer cannot read earns nothing
                continue
            if math.isfinite(score) and score > 0:
                shown = text if len(text) <= 40 else text[:37] + "..."
                _NON_ANSWER_CREDIT[key] = f"{what} ({shown!r}) earned {score:g} on entry {key[4]}"
                break
    return _NON_ANSWER_CREDIT[key]


def _non_answer_credit(key: tuple[str, str, int, int, int]) -> str | None:
    """Which non-answer the draw's scorer pays on its first ``PROBED_ENTRIES`` entries or on this one."""
    probed = [*range(min(key[3], PROBED_ENTRIES)), key[4]]
    return next(filter(None, (_entry_credit((*key[:4], index)) for index in probed)), None)


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
    _non_answer_credit((name, config_json, seed, size, index))


def _unparsable(key: tuple[str, str, int, int, int], entry: dict[str, Any], error: Exception) -> str:
    """Why the scorer could not read the answer; raises when it cannot read the gold either."""
    if isinstance(error, ENVIRONMENT_FAILURES):
        raise error
    if entry.get("answer") is not None:
        try:
            _dataset(*key[:4]).score_answer(str(entry["answer"]), entry)
        except Exception as gold_error:
            raise ValueError(
                f"{key[0]} scorer fails on the gold answer too ({type(gold_error).__name__}: {gold_error})"
            ) from None
    return f"{type(error).__name__}: {error}"[:200]


def score_reasoning_gym_answer(request: dict[str, Any]) -> dict[str, Any]:
    """``{"score": float, "non_answer_credit": str | None}``, plus ``"refused"`` (the guard refused the
    answer) or ``"unparsable"`` (the scorer raised reading it), both with a score of 0."""
    prepare(request)
    key = _key(request)
    entry = _entry(*key)
    reply: dict[str, Any] = {"score": 0.0, "non_answer_credit": _non_answer_credit(key)}
    guarded = request.get("guard", True)
    refused = guard_problem(key[0], request["answer"], entry) if guarded else None
    if refused is not None:
        return {**reply, "refused": refused}
    try:
        with literals_only(key[0]) if guarded else contextlib.nullcontext():
            raw = _dataset(*key[:4]).score_answer(request["answer"], entry)
    except Exception as exc:
        return {**reply, "unparsable": _unparsable(key, entry, exc)}
    score = float(raw)
    if not math.isfinite(score):
        raise ValueError(f"{key[0]} scorer returned {score}")
    return {**reply, "score": min(1.0, max(0.0, score))}
