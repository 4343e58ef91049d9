"""``bench/batching.py`` runs both arms on a small rollout: every row is sampled, the same seeds
give both arms the same tokens, and each reports its batches and time. How many batches each arm
makes depends on when requests arrive, so it is the benchmark's figure, not an assertion here."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

BENCH = Path(__file__).resolve().parents[2] / "bench" / "batching.py"


def test_the_batching_bench_compares_its_arms_on_the_same_samples():
    command = [sys.executable, str(BENCH), "--prompts", "8", "--group-size", "4", "--concurrency", "16"]
    command += ["--new-tokens", "6", "--rounds", "2"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["bench"] == "batching" and result["same_samples"] is True
    for arm in ("one_pass", "gather"):
        assert all(sum(rows) == 32 for rows in result[arm]["batch_rows"]), result[arm]
    assert result["speedup"] > 0
