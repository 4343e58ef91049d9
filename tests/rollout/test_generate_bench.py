"""``bench/generate.py --model DIR`` on a small model: one JSON line with every engine's column
and the machine's ceilings measured beside them."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

BENCH = Path(__file__).resolve().parents[2] / "bench" / "generate.py"


def test_the_generate_bench_measures_a_model_directory_against_its_ceilings(tiny_model_dir):
    command = [sys.executable, str(BENCH), "--model", str(tiny_model_dir), "--batch", "4", "--new-tokens", "6"]
    done = subprocess.run([*command, "--repeats", "1"], capture_output=True, text=True, timeout=600, check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["bench"] == "generate" and result["batch"] == 4 and result["new_tokens"] == 6
    for column in ("veriloop_tokens_per_s", "veriloop_float32_tokens_per_s", "transformers_generate_tokens_per_s"):
        assert result[column] > 0
    best = max(result["veriloop_tokens_per_s"], result["veriloop_float32_tokens_per_s"])
    assert result["speedup"] == round(best / result["transformers_generate_tokens_per_s"], 2)
    assert result["memory_bandwidth_gb_per_s"] > 0 and result["bfloat16_matmul_gflop_per_s"] > 0
    ceiling = 4 * result["memory_bandwidth_gb_per_s"] * 1e9 / (2 * result["parameters"])
    assert abs(result["bandwidth_ceiling_tokens_per_s"] - ceiling) <= 0.01 * ceiling  # bandwidth printed rounded
