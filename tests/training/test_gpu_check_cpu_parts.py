"""``bench/gpu_check.py``'s parts that need no vLLM, on CPU with the tiny shape: the ``hf``
engine's generation, the mismatch of one GRPO step's batch under every correction mode, packed
vs padded updates; the vllm parts say why they were skipped (one process tries, the other part
takes its reason), and parts past the whole check's time limit are not started.
``test_gpu_check_bench.py`` runs the whole path where vLLM imports (.venv-vllm)."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from veriloop.algorithms import CORRECTIONS

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        importlib.util.find_spec("vllm") is not None, reason="vllm imports here: see test_gpu_check_bench"
    ),
]

BENCH = Path(__file__).resolve().parents[2] / "bench" / "gpu_check.py"
TINY = ["--device", "cpu", "--shape", "tiny", "--prompts", "2", "--group-size", "4", "--new-tokens", "8"]


def _check(*options: str) -> dict:
    done = subprocess.run(
        [sys.executable, str(BENCH), *TINY, *options], capture_output=True, text=True, timeout=300, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_parts_without_vllm_run_on_cpu_and_the_vllm_parts_say_why_they_were_skipped():
    parts = "hf_generate,vllm_generate,mismatch_hf,packing,mismatch_vllm"
    small = ["--mismatch-prompts", "2", "--mismatch-new-tokens", "8", "--packing-micro-batch-size", "2"]
    result = _check(*small, "--packing-max-tokens", "2048", "--parts", parts, "--part-timeout-s", "240")
    assert list(result)[3:] == parts.split(","), result  # after bench, device, gpus: the parts asked for, in order
    generate = result["hf_generate"]
    assert generate["dtype"] == "float32" and generate["samples"] == 8 and generate["generated_tokens"] == 8 * 8
    assert generate["generation_tokens_per_s"] > 0 and "weight_push_s" not in generate
    assert "import vllm failed" in result["vllm_generate"]["skipped"]
    assert result["mismatch_vllm"] == {"skipped": result["vllm_generate"]["skipped"]}
    assert "generation" not in result  # the side-by-side needs both engines

    gap = result["mismatch_hf"]
    assert gap["samples"] == 8 and 0 < gap["tokens"] <= 8 * 8
    # The hf engine samples with the trainer's own float32 weights: they differ by rounding only.
    assert 0 <= gap["abs_logprob_diff_mean"] <= gap["abs_logprob_diff_max"] < 1e-4 and gap["kl_k3"] >= 0
    assert gap["step_logged_abs_logprob_diff_mean"] == pytest.approx(gap["abs_logprob_diff_mean"], abs=1e-6)
    assert sorted(gap["modes"]) == CORRECTIONS.names()
    for mode, figures in gap["modes"].items():  # so small a gap is inside every mode's bounds
        assert figures["weight_mean"] == 1.0, mode
        assert figures["masked_token_fraction"] == figures["capped_token_fraction"] == 0.0, mode
        assert figures["masked_sequence_fraction"] == figures["capped_sequence_fraction"] == 0.0, mode

    packing = result["packing"]
    assert packing["device"] == "cpu" and packing["rows"] == 8 and packing["tokens"] > 0
    assert packing["micro_batch_size"] == 2 and packing["max_tokens_per_micro_batch"] == 2048
    assert packing["padded_step_s"] > 0 and packing["packed_step_s"] > 0
    assert "padded_peak_gpu_memory_gb" not in packing  # on CPU: resident memory only


def test_parts_past_the_whole_checks_time_limit_are_not_started():
    result = _check("--parts", "hf_generate,data_parallel", "--total-timeout-s", "1", "--vllm-skip", "none here")
    for part in ("hf_generate", "data_parallel"):
        assert result[part] == {"skipped": "no time left within --total-timeout-s 1"}
