"""veriloop: reinforcement learning from verifiable rewards, with an evaluation loop.

The package is layered (see docs/architecture.md); import the subpackage you need, e.g.
``from veriloop.core import Task``. Nothing heavy is imported here so that the command line
starts fast. The one thing done on import, before torch can run a matrix product in this
process or the ones it starts: ask MKL for batch-invariant products (``veriloop.core._blas``
explains why, and checks that it took effect).
"""

import os as _os

MKL_CBWR = "MKL_CBWR"
STRICT_BLAS_DEFAULT = "AUTO,STRICT"
STRICT_BLAS_OPT_OUT = "VERILOOP_STRICT_BLAS"  # "0": MKL's default kernels (faster, not batch-invariant)


def strict_blas_wanted() -> bool:
    return _os.environ.get(STRICT_BLAS_OPT_OUT, "1").strip().lower() not in ("0", "false", "no", "off")


if strict_blas_wanted():
    _os.environ.setdefault(MKL_CBWR, STRICT_BLAS_DEFAULT)  # a mode the user chose is kept

__version__ = "0.1.0"

__all__ = ["__version__"]
