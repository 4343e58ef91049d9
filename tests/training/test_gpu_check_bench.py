"""``bench/gpu_check.py`` runs its whole path on CPU with the tiny shape: the GRPO step's
figures, the vllm engine's figures and the data-parallel part skipped without CUDA. It runs in
vLLM's environment (.venv-vllm, `make test` and `make test-scale`), where every part has
something to do; the main environment would only repeat the GRPO step."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.scale,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="runs in .venv-vllm (make setup-vllm)"),
]

BENCH = Path(__file__).resolve().parents[2] / "bench" / "gpu_check.py"


def test_the_gpu_check_runs_its_path_on_cpu():
    command = [sys.executable, str(BENCH), "--device", "cpu", "--shape", "tiny", "--prompts", "2"]
    command += ["--group-size", "4", "--new-tokens", "8", "--kv-cache-gb", "0.125", "--part-timeout-s", "280"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["bench"] == "gpu_check" and result["device"] == "cpu"
    step = result["grpo_step"]
    assert step["shape"] == "tiny" and step["samples"] == 8 and 0 < step["mfu"] < 1, step
    generate = result["vllm_generate"]
    assert generate["samples"] == 8 and generate["generated_tokens"] == 8 * 8, generate
    assert generate["generation_tokens_per_s"] > 0 and generate["weight_push_s"] > 0
    assert result["data_parallel"]["skipped"] == "needs CUDA devices (NCCL)"
