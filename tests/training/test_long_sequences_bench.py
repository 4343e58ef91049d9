import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

BENCH = Path(__file__).resolve().parents[2] / "bench" / "long_sequences.py"


def test_the_long_sequence_benchmark_reports_each_setting_from_its_own_process():
    command = [sys.executable, str(BENCH), "--rows", "2", "--tokens", "96", "--prompt-tokens", "16"]
    command += ["--shapes", "tiny", "--settings", "before", "after"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert (result["rows"], result["tokens"], result["prompt_tokens"]) == (2, 96, 16)
    tiny = result["tiny"]
    for setting in ("before", "after"):
        figures = tiny[setting]
        assert figures["device"] == "cpu" and figures["before_pass_mb"] > 50
        assert figures["peak_mb"] >= figures["before_pass_mb"] and figures["pass_s"] > 0
    assert tiny["after_over_before"] == round(tiny["after"]["pass_peak_mb"] / tiny["before"]["pass_peak_mb"], 3)
