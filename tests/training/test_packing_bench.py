"""``bench/packing.py`` runs both sides on one batch of the tiny model, reports the figures the
README quotes, and leaves nothing behind in the temporary directory (models and run folders of
the real model are hundreds of megabytes). Which side is faster is the benchmark's figure, not an
assertion here."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

BENCH = Path(__file__).resolve().parents[2] / "bench" / "packing.py"


def test_the_packing_bench_runs_both_sides_and_cleans_up(tmp_path):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    command = [sys.executable, str(BENCH), "--tiny", "--repeats", "1", "--prompts", "1", "--group-size", "4"]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=600, check=True, env={**os.environ, "TMPDIR": str(scratch)}
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["model"] == "tiny" and result["rows"] == 4 and result["tokens"] > 0
    for key in ("padded_step_s", "packed_step_s", "speedup", "padded_peak_rss_mb", "packed_peak_rss_mb"):
        assert result[key] > 0, key
    left = [path.name for path in scratch.iterdir() if not path.name.startswith("torchinductor_")]  # torch's cache
    assert left == []
