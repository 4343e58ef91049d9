"""Strict MKL in every process that imports veriloop: a row's product does not depend on its batch.

Each case runs in a fresh interpreter, because MKL fixes its mode at its first call.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from veriloop.core import blas_mode
from veriloop.core._blas import INTEL, cpu_vendor

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(blas_mode().library != "mkl", reason="torch here does not use MKL")]
ON_INTEL = cpu_vendor() == INTEL

# Rows multiplied alone, in small groups and in the whole batch, at several widths.
PROBE = """
import json, sys, warnings
warnings.simplefilter("always")
{before}
import torch
{import_veriloop}
from veriloop.core import blas_mode, ensure_strict_blas
with warnings.catch_warnings(record=True) as caught:
    mode = ensure_strict_blas()
torch.manual_seed(0)
invariant = True
for k, n in ((64, 300), (128, 512), (256, 1000)):
    x, w = torch.randn(16, k), torch.randn(k, n)
    whole = x @ w
    invariant &= all(torch.equal(whole[i:i + size], x[i:i + size] @ w) for size in (1, 2, 3, 5) for i in range(16 - size))
print(json.dumps({{"strict": mode.strict, "branch": mode.branch, "invariant": invariant,
                  "reproducible": mode.reproducible, "warned": [str(w.message) for w in caught]}}))
"""


def _probe(before: str = "", import_veriloop: str = "import veriloop", **env: str) -> dict:
    environment = {k: v for k, v in os.environ.items() if k not in ("MKL_CBWR", "VERILOOP_STRICT_BLAS")}
    environment.update(env)
    code = PROBE.format(before=before, import_veriloop=import_veriloop)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_importing_veriloop_makes_products_batch_invariant():
    result = _probe()
    assert result["strict"] and result["branch"] == "AUTO" and not result["warned"]
    assert result["reproducible"] == ON_INTEL
    if result["reproducible"]:
        assert result["invariant"]


def test_torch_imported_first_is_still_in_time():
    """MKL starts at its first product, not when torch loads."""
    result = _probe(before="import torch")
    assert result["strict"] and not result["warned"]
    assert result["invariant"] or not result["reproducible"]


def test_ensure_applies_strict_mode_when_veriloop_was_imported_late():
    """Without the environment variable (a process started by someone else), the engine's call sets it."""
    result = _probe(import_veriloop="import os; import veriloop; os.environ.pop('MKL_CBWR')")
    assert result["strict"]
    assert result["invariant"] or not result["reproducible"]


def test_batch_invariance_is_promised_only_where_mkl_keeps_it():
    """MKL's strict mode holds on Intel CPUs; elsewhere the mode says so instead of promising it."""
    mode = blas_mode()
    assert mode.vendor == cpu_vendor()
    assert mode.reproducible == (mode.strict and mode.vendor == INTEL)


def test_mkl_used_before_veriloop_is_a_warning_not_a_silent_loss():
    result = _probe(before="import torch; torch.ones(4, 4) @ torch.ones(4, 4)")
    assert not result["strict"]
    assert len(result["warned"]) == 1 and "MKL_CBWR=AUTO,STRICT" in result["warned"][0]


@pytest.mark.skipif(not ON_INTEL, reason=f"MKL refuses named branches such as AVX2 on this {cpu_vendor()} CPU")
def test_a_mode_chosen_by_the_user_is_kept():
    result = _probe(MKL_CBWR="AVX2,STRICT")
    assert result == {"strict": True, "branch": "AVX2", "invariant": True, "reproducible": True, "warned": []}


def test_opting_out_leaves_mkl_alone():
    result = _probe(VERILOOP_STRICT_BLAS="0")
    assert not result["strict"] and not result["warned"]
