"""Batch-invariant matrix products: a sample's numbers depend on its seed, not on its batch.

PyTorch's x86-64 CPU wheels multiply matrices with Intel MKL, which picks a GEMM kernel by
shape and CPU. On CPUs with AVX-512 and AMX, one row's product can then change in its last
bits with the number of rows beside it, so a prompt sampled alone and in a batch gets other
log-probs, and after enough tokens other tokens. MKL's conditional numerical reproducibility
in strict mode (``MKL_CBWR=<branch>,STRICT``) fixes the kernel: the same row gives the same
bits in any batch and with any thread count, on every CPU of that branch.

MKL reads the setting once, on its first call, so it has to be in the environment before the
first matrix product of the process. ``veriloop/__init__`` sets it (with nothing imported:
the command line stays fast; child processes inherit the variable), and the
engine and trainer call ``ensure_strict_blas``, which applies it if MKL has not run yet and
warns once if it ran earlier in another mode.

Not guaranteed: other BLAS libraries (ARM, OpenBLAS builds) are left as they are, results
differ between MKL branches (AVX2 vs AVX-512 kernels) and between devices, and MKL's strict
mode holds on Intel CPUs only. On other x86-64 CPUs (AMD EPYC with AVX-512, measured) MKL
accepts ``AUTO,STRICT`` but refuses every named branch and still changes a row's last bits
with the number of rows beside it (1-3, 5-7 and 9-11 rows differ from 4, 8 and 12 or more):
``BlasMode.reproducible`` is False there, and batch invariance is not promised.
"""

from __future__ import annotations

import ctypes
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

from veriloop import MKL_CBWR, STRICT_BLAS_DEFAULT, strict_blas_wanted

_STRICT_FLAG = 0x10000  # MKL_CBWR_STRICT
_AUTO_BRANCH = 2  # MKL_CBWR_AUTO
_ALL = -1  # MKL_CBWR_ALL: the branch and the strict flag together
_BRANCHES = {
    1: "OFF",
    2: "AUTO",
    3: "COMPATIBLE",
    4: "SSE2",
    6: "SSSE3",
    7: "SSE4_1",
    8: "SSE4_2",
    9: "AVX",
    10: "AVX2",
    12: "AVX512",
    14: "AVX512_E1",
}


@dataclass(frozen=True)
class BlasMode:
    """What the process's BLAS does: ``library`` "mkl" or "other"; ``branch`` the MKL code path."""

    library: str
    branch: str
    strict: bool
    vendor: str = "unknown"  # the CPU's vendor id, e.g. GenuineIntel, AuthenticAMD

    @property
    def reproducible(self) -> bool:
        """Whether a row's product is promised to be the same in any batch: MKL strict on an Intel CPU."""
        return self.library == "mkl" and self.strict and self.vendor == INTEL


INTEL = "GenuineIntel"


def cpu_vendor() -> str:
    """The CPU's vendor id from /proc/cpuinfo ("unknown" where there is none, e.g. on ARM)."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("vendor_id"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def _mkl_functions() -> tuple[ctypes._CFuncPtr, ctypes._CFuncPtr] | None:
    """MKL's get/set of the reproducibility mode, as exported by torch's CPU library; None without MKL."""
    import torch

    candidates = [Path(torch.__file__).parent / "lib" / "libtorch_cpu.so", None]
    for path in candidates:
        try:
            library = ctypes.CDLL(str(path) if path else None)
        except OSError:
            continue
        for prefix in ("mkl_serv_cbwr", "mkl_cbwr"):
            get, set_ = getattr(library, f"{prefix}_get", None), getattr(library, f"{prefix}_set", None)
            if get is not None and set_ is not None:
                get.restype, get.argtypes = ctypes.c_int, [ctypes.c_int]
                set_.restype, set_.argtypes = ctypes.c_int, [ctypes.c_int]
                return get, set_
    return None


def blas_mode() -> BlasMode:
    """The reproducibility mode MKL runs in (or would run in, if it has not been called yet)."""
    functions = _mkl_functions()
    if functions is None:
        return BlasMode(library="other", branch="n/a", strict=False)
    setting = functions[0](_ALL)
    return BlasMode(
        library="mkl",
        branch=_BRANCHES.get(setting & 0xFFFF, str(setting & 0xFFFF)),
        strict=bool(setting & _STRICT_FLAG),
        vendor=cpu_vendor(),
    )


_warned = False


def ensure_strict_blas() -> BlasMode:
    """Make MKL strict if it is wanted and still possible; warn once when MKL already ran otherwise.

    Returns the mode in force. A mode the user set in ``MKL_CBWR`` is kept as it is.
    """
    global _warned
    mode = blas_mode()
    if (
        mode.library != "mkl"
        or mode.strict
        or not strict_blas_wanted()
        or os.environ.get(MKL_CBWR, STRICT_BLAS_DEFAULT) != STRICT_BLAS_DEFAULT
    ):
        return mode
    _, set_mode = _mkl_functions()  # type: ignore[misc]
    if set_mode(_AUTO_BRANCH | _STRICT_FLAG) == 0:
        return blas_mode()
    if not _warned:
        _warned = True
        warnings.warn(
            "MKL ran matrix products before veriloop was imported, so sampling is not batch-invariant "
            f"in this process: import veriloop before torch, or set {MKL_CBWR}={STRICT_BLAS_DEFAULT} in the environment",
            RuntimeWarning,
            stacklevel=2,
        )
    return mode
