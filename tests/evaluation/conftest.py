"""Eval runs with planted outcomes: real sample rows and summaries, written as ``veriloop eval`` does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


def planted_samples(outcomes: dict[str, tuple[str, list[bool]]]):
    """``task_id -> (domain, [passed per sample])`` as EvalSample rows."""
    from veriloop.evaluation import EvalSample

    rows = []
    for task_id, (domain, passes) in outcomes.items():
        for index, passed in enumerate(passes):
            rows.append(
                EvalSample(
                    task_id=task_id,
                    domain=domain,
                    sample_index=index,
                    prompt=f"question of {task_id}",
                    response="42" if passed else "41",
                    reward=float(passed),
                    passed=passed,
                    detail="equals the gold answer" if passed else "differs from the gold answer",
                    feedback="Correct." if passed else f"Expected 42 for {task_id}, got 41.",
                    completion_tokens=3,
                    generate_s=0.01,
                    verify_s=0.001,
                    chunk=0,
                    chunk_wall_s=0.5,
                )
            )
    return rows


@pytest.fixture
def planted():
    """The ``planted_samples`` builder."""
    return planted_samples


@pytest.fixture
def write_run():
    """Write an eval directory (samples.parquet and summary.json) from planted outcomes."""
    from veriloop.core import write_parquet
    from veriloop.evaluation import summarize

    def write(
        directory: Path, outcomes: dict[str, tuple[str, list[bool]]], created_at: str = "2026-01-01T00:00:00+00:00"
    ) -> Path:
        rows = planted_samples(outcomes)
        samples = max(len(p) for _, p in outcomes.values())
        summary = {
            "model": directory.name,
            "engine": "planted",
            "task_set_hash": "planted",
            "samples_per_task": samples,
            "seed": 0,
            **summarize(rows, samples),
            "created_at": created_at,
            "out": str(directory),
        }
        directory.mkdir(parents=True, exist_ok=True)
        write_parquet(directory / "samples.parquet", rows)
        (directory / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
        return directory

    return write
