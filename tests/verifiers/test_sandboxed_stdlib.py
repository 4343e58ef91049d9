"""Code under a folder named ``sandboxed`` runs inside the sandbox: standard library only.

Every module under any ``sandboxed/`` folder of ``src/veriloop`` (whichever subpackage holds it)
may import the standard library and the other modules of its own ``sandboxed/`` folder,
absolutely or relatively; an import of anything else, ``veriloop`` included, fails here.
Imports inside functions count too: they run in the sandbox all the same.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import veriloop

PACKAGE_ROOT = Path(veriloop.__file__).parent


def _dotted(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _sandboxed_folders(package_root: Path) -> list[Path]:
    return sorted(p for p in package_root.rglob("sandboxed") if p.is_dir())


def _imports(path: Path, own_module: str) -> list[tuple[int, str]]:
    """``(line, module)`` for every import in the file (any depth), relative ones made absolute."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = own_module if path.name == "__init__.py" else own_module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.append((node.lineno, module))
    return found


def _allowed(module: str, folder_module: str) -> bool:
    """The standard library, or the sandboxed folder itself and the modules inside it."""
    if module.partition(".")[0] in sys.stdlib_module_names:
        return True
    return module == folder_module or module.startswith(folder_module + ".")


def _violations(package_root: Path) -> list[str]:
    root = package_root.parent
    problems = []
    for folder in _sandboxed_folders(package_root):
        folder_module = ".".join(folder.relative_to(root).parts)
        for path in sorted(folder.rglob("*.py")):
            own = _dotted(path, root)
            for line, module in _imports(path, own):
                if not _allowed(module, folder_module):
                    problems.append(f"{path}:{line}: {own} runs in the sandbox but imports {module}")
    return problems


def test_sandboxed_modules_import_only_the_standard_library():
    assert _sandboxed_folders(PACKAGE_ROOT), "no sandboxed/ folder found under src/veriloop"
    problems = _violations(PACKAGE_ROOT)
    assert not problems, "standard library and sibling modules only:\n" + "\n".join(problems)


def test_the_walker_catches_a_planted_import(tmp_path):
    """The walker must catch a third-party or veriloop import, absolute or relative, at any depth."""
    folder = tmp_path / "veriloop" / "somewhere" / "sandboxed"
    folder.mkdir(parents=True)
    for init in (tmp_path / "veriloop", tmp_path / "veriloop" / "somewhere", folder):
        (init / "__init__.py").write_text('"""fake"""\n')
    (folder / "_sibling.py").write_text("import json\n")
    (folder / "_good.py").write_text(
        "import os\nfrom collections import abc\nfrom . import _sibling\nfrom ._sibling import json\n"
        "from veriloop.somewhere.sandboxed._sibling import json  # sandbox: strip\n"
        "def f():\n    import base64\n"
    )
    (folder / "_bad.py").write_text(
        "import numpy\nfrom veriloop.core import Task\nfrom .. import _host\n"
        "def f():\n    from pydantic import BaseModel\n"
    )
    problems = _violations(tmp_path / "veriloop")
    assert [p.rpartition(" imports ")[2] for p in problems] == [
        "numpy",
        "veriloop.core",
        "veriloop.somewhere",
        "pydantic",
    ]
    assert all("_bad.py" in p for p in problems)
