"""``bench/mcp_tools.py``: one JSON line comparing the sandboxed server's episodes with the unsandboxed ones."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

BENCH = Path(__file__).resolve().parents[2] / "bench" / "mcp_tools.py"


def test_the_mcp_bench_prints_both_columns_and_their_ratios():
    command = [sys.executable, str(BENCH), "--episodes", "1", "--calls", "2"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["bench"] == "mcp_tools" and result["episodes"] == 1 and result["calls"] == 2
    for column in ("sandboxed", "plain"):
        assert result[column]["start_s"] > 0 and result[column]["call_ms"] > 0
    assert result["start_ratio"] == round(result["sandboxed"]["start_s"] / result["plain"]["start_s"], 2)
