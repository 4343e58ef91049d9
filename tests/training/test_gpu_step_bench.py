import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

BENCH = Path(__file__).resolve().parents[2] / "bench" / "gpu_step.py"


def test_the_gpu_step_benchmark_runs_its_path_on_cpu():
    done = subprocess.run(
        [
            sys.executable,
            str(BENCH),
            "--device",
            "cpu",
            "--shape",
            "tiny",
            "--steps",
            "2",
            "--prompts",
            "2",
            "--group-size",
            "4",
            "--new-tokens",
            "8",
            "--micro-batch-size",
            "8",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["shape"] == "tiny" and result["samples"] == 8
    assert result["generation_tokens_per_s"] > 0 and result["update_s"] > 0
    # Two prompts of the same length, once each, and eight completions of at most 8 tokens.
    assert 8 < result["training_tokens"] <= 2 * 40 + 8 * 8
    assert 0 < result["mfu"] < 1
