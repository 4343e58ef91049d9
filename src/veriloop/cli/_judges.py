"""Local judge models for the commands that verify without the rollout layer.

A ``judge`` verifier whose ``model`` is a local directory is served by a veriloop engine, which
``veriloop.rollout`` registers as a judge backend. ``verify``, ``audit`` and ``tasks validate``
need no engine otherwise, so they import it (and torch with it) only for a task set that names
a judge model.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any


def serve_judge_models(verifiers: Iterable[Any]) -> None:
    """Import ``veriloop.rollout`` when any of ``verifiers`` (task ``verifier`` objects, checks
    inside ``all_of`` and ``weighted`` included) has a judge ``model``."""
    from veriloop.verifiers import judge_specs

    if any(spec.get("model") for verifier in verifiers for spec in judge_specs(verifier)):
        import veriloop.rollout  # noqa: F401  (registers the judge backend that serves a local model)


def serve_judge_models_of(path: Path) -> None:
    """``serve_judge_models`` for the rows of a task file, read as plain objects (bad rows are
    left to the checks that report them)."""
    from veriloop.core import iter_objects

    serve_judge_models(obj.get("verifier") for _, obj, error in iter_objects(path) if isinstance(obj, dict))
