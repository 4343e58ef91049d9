"""``bench/gateway.py`` on small settings: both overhead arms sample the same tokens, and the load run
loses no call, puts none in another episode, and every later call continues its episode's last one.
The milliseconds are the benchmark's figures, not assertions here."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

BENCH = Path(__file__).resolve().parents[2] / "bench" / "gateway.py"


def test_the_gateway_bench_checks_its_calls():
    command = [sys.executable, str(BENCH), "--calls", "2", "--new-tokens", "4", "--episodes", "6"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["bench"] == "gateway" and result["same_tokens"] is True
    assert result["calls_sent"] == result["calls_recorded"] == 15 and result["calls_lost"] == 0
    assert result["calls_in_another_episode"] == 0 and result["calls_not_continuing_their_episode"] == 0
    assert result["gateway_openai_ms_per_call"] > 0 and result["engine_agenerate_ms_per_call"] > 0
