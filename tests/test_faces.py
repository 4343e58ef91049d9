"""Packages talk through their faces (docs/architecture.md): a module of one veriloop subpackage
imports another subpackage only through that package's ``__init__`` (``from veriloop.sandbox
import Limits``), never one of its modules (``veriloop.sandbox._bwrap``) and never an underscore
name. A public subpackage (``veriloop.verifiers.audit``) is a face only through its ``__init__``.
What another package needs belongs in its face's ``__all__``, or the code belongs elsewhere.
"""

from __future__ import annotations

import ast
from pathlib import Path

import veriloop

PACKAGE_ROOT = Path(veriloop.__file__).parent

ALLOWED: set[tuple[str, str]] = set()
"""(importing module, imported module) pairs let through; each entry needs a comment saying why."""


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, module: str) -> list[tuple[int, str, list[str]]]:
    """(line, absolute module, names taken from it) for every import in ``path``, at any depth."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            found.append((node.lineno, source, [alias.name for alias in node.names]))
    return found


def private_reaches(root: Path) -> list[str]:
    """Every import, under ``root`` (the ``veriloop`` folder), of another subpackage's private
    module or underscore name, as ``path:line: imported``."""
    violations = []
    for path in sorted(root.rglob("*.py")):
        module = _module_name(path, root)
        own = module.split(".")[1] if "." in module else None
        for line, imported, names in _imports(path, module):
            parts = imported.split(".")
            if parts[0] != "veriloop" or len(parts) < 2 or parts[1] == own:
                continue
            if (module, imported) in ALLOWED:
                continue
            private = [p for p in parts[1:] if p.startswith("_")] + [n for n in names if n.startswith("_")]
            if private:
                shown = imported + (f" ({', '.join(names)})" if names else "")
                violations.append(f"{path}:{line}: {shown}")
    return violations


def test_packages_import_each_other_through_their_faces():
    found = private_reaches(PACKAGE_ROOT)
    assert not found, "import these through the package's __init__ (export them there):\n" + "\n".join(found)


def test_the_checker_sees_a_private_reach(tmp_path):
    """Private modules and names, absolute or relative, at any depth; own package and faces pass."""
    root = tmp_path / "veriloop"
    (root / "cli").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "cli" / "_bad.py").write_text(
        "from veriloop.sandbox._bwrap import open_shell\n"
        "def run():\n    from ..training import _ray_ranks\n"
        "import veriloop.verifiers.audit._regressions\n"
        "from veriloop.sandbox import Limits\n"
        "from veriloop.verifiers.audit import audit_tasks\n"
        "from veriloop.cli._main import main\n"
    )
    found = [line.split(": ", 1)[1] for line in private_reaches(root)]
    assert found == [
        "veriloop.sandbox._bwrap (open_shell)",
        "veriloop.verifiers.audit._regressions",
        "veriloop.training (_ray_ranks)",
    ]
