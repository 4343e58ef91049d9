import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

BENCH = Path(__file__).resolve().parents[2] / "bench" / "mismatch.py"


def test_the_mismatch_benchmark_reports_each_mode():
    command = [sys.executable, str(BENCH), "--steps", "1", "--modes", "none,token_mask", "rollout.dtype=bfloat16"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["overrides"] == ["rollout.dtype=bfloat16"] and set(result) >= {"none", "token_mask"}
    for mode in ("none", "token_mask"):
        assert 0 < result[mode]["abs_logprob_diff_mean"] <= result[mode]["abs_logprob_diff_max"]
