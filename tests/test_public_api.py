"""Every name a package exports in ``__all__`` imports, and every package declares ``__all__``."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import veriloop

PACKAGES = sorted(
    name
    for _, name, is_package in pkgutil.walk_packages(veriloop.__path__, prefix="veriloop.")
    if is_package and not name.rpartition(".")[2].startswith("_")
)


@pytest.mark.parametrize("package", ["veriloop", *PACKAGES])
def test_all_names_import(package):
    module = importlib.import_module(package)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{package} has no __all__"
    assert len(set(exported)) == len(exported), f"{package}.__all__ repeats a name"
    for name in exported:
        assert hasattr(module, name), f"{package}.__all__ names {name!r}, which is missing"


def test_cli_help_does_not_load_heavy_modules():
    """``veriloop --help`` must start fast: the CLI module may not import torch or pyarrow."""
    import subprocess
    import sys

    code = (
        "import sys, veriloop.cli;"
        "heavy = [m for m in ('torch', 'transformers', 'pyarrow', 'numpy', 'pydantic') if m in sys.modules];"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
