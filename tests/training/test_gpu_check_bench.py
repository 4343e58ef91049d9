"""``bench/gpu_check.py`` runs its whole path on CPU with the tiny shape: the GRPO step's
figures, both engines' generation side by side, the mismatch of a batch each engine sampled under
every correction mode, packed vs padded updates, and the data-parallel part skipped without
CUDA. It runs in vLLM's environment (.venv-vllm, `make test` and `make test-scale`), where every
part has something to do; ``test_gpu_check_cpu_parts.py`` runs the parts without vLLM in the
main environment."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from veriloop.algorithms import CORRECTIONS

pytestmark = [
    pytest.mark.scale,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="runs in .venv-vllm (make setup-vllm)"),
]

BENCH = Path(__file__).resolve().parents[2] / "bench" / "gpu_check.py"


def test_the_gpu_check_runs_its_path_on_cpu():
    command = [sys.executable, str(BENCH), "--device", "cpu", "--shape", "tiny", "--prompts", "2"]
    command += ["--group-size", "4", "--new-tokens", "8", "--kv-cache-gb", "0.125", "--part-timeout-s", "280"]
    command += ["--mismatch-prompts", "2", "--mismatch-new-tokens", "8", "--total-timeout-s", "1100"]
    command += ["--packing-micro-batch-size", "2", "--packing-max-tokens", "2048"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1200, check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["bench"] == "gpu_check" and result["device"] == "cpu"
    step = result["grpo_step"]
    assert step["shape"] == "tiny" and step["samples"] == 8 and 0 < step["mfu"] < 1, step
    for engine in ("hf", "vllm"):  # the same batch for both engines
        generate = result[f"{engine}_generate"]
        assert generate["samples"] == 8 and generate["generated_tokens"] == 8 * 8, generate
        assert generate["dtype"] == "float32" and generate["generation_tokens_per_s"] > 0
    assert result["vllm_generate"]["weight_push_s"] > 0
    generation = result["generation"]
    assert generation["hf_tokens_per_s"] == result["hf_generate"]["generation_tokens_per_s"]
    assert generation["vllm_over_hf"] == round(generation["vllm_tokens_per_s"] / generation["hf_tokens_per_s"], 2)
    for engine in ("hf", "vllm"):  # float32 on CPU: the engines agree with the trainer to rounding
        gap = result[f"mismatch_{engine}"]
        assert gap["samples"] == 8 and 0 < gap["tokens"] <= 8 * 8, gap
        assert 0 <= gap["abs_logprob_diff_mean"] <= gap["abs_logprob_diff_max"] < 1e-4, gap
        assert sorted(gap["modes"]) == CORRECTIONS.names()
        assert all(figures["masked_token_fraction"] == 0.0 for figures in gap["modes"].values()), gap
    packing = result["packing"]
    assert packing["rows"] == 8 and packing["padded_step_s"] > 0 and packing["packed_step_s"] > 0, packing
    assert result["data_parallel"]["skipped"] == "needs CUDA devices (NCCL)"
