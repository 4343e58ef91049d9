"""A killed ``veriloop eval`` resumes: finished chunks are kept, the rest is sampled, and the
result equals a run that was never interrupted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from veriloop.core import read_parquet_rows, write_jsonl
from veriloop.evaluation import EvalSample, load_run, run_eval
from veriloop.tasks import generate_tasks

pytestmark = pytest.mark.e2e

VERILOOP = Path(sys.executable).with_name("veriloop")


def _wait_for_parts(parts: Path, process: subprocess.Popen, count: int, timeout_s: float = 120) -> list[Path]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = sorted(parts.glob("part-*.parquet")) if parts.is_dir() else []
        if len(found) >= count:
            return found
        assert process.poll() is None, process.stderr.read()
        time.sleep(0.02)
    raise AssertionError(f"no {count} part files within {timeout_s}s")


def test_eval_resumes_after_sigkill(tiny_model_dir, tiny_engine, tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    # exact-match grading keeps the test about resuming, not about the math verifier's speed
    write_jsonl(
        tasks,
        [t.model_copy(update={"verifier": {"kind": "exact"}}) for t in generate_tasks("arithmetic", seed=21, size=8)],
    )
    out = tmp_path / "run"
    command = [
        str(VERILOOP),
        "eval",
        "--model",
        str(tiny_model_dir),
        "--tasks",
        str(tasks),
        "--samples",
        "2",
        "--max-tokens",
        "8",
        "--seed",
        "9",
        "--chunk-size",
        "2",
        "--out",
        str(out),
    ]

    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for_parts(out / "parts", process, count=1)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL
    written = sorted((out / "parts").glob("part-*.parquet"))
    assert 1 <= len(written) < 4 and not (out / "summary.json").exists()
    rows = [EvalSample.model_validate(r).model_dump() for part in written for r in read_parquet_rows(part)]
    before = {(r["task_id"], r["sample_index"]): r for r in rows}

    resumed = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    run = load_run(out)
    assert len(run.samples) == 16 and len({(s.task_id, s.sample_index) for s in run.samples}) == 16
    after = {(s.task_id, s.sample_index): s.model_dump() for s in run.samples}
    for key, row in before.items():  # chunks finished before the kill were kept, not sampled again
        assert after[key] == row

    reference = run_eval(
        tiny_engine, tasks, samples=2, max_tokens=8, seed=9, chunk_size=2, out=tmp_path / "straight", record=False
    )
    straight = load_run(tmp_path / "straight")
    assert [s.response for s in straight.samples] == [s.response for s in run.samples]
    assert reference["pass@1"] == run.summary["pass@1"]
    assert not os.path.exists(out / "parts")
