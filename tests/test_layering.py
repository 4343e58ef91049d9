"""The house's structure, read from the source (docs/architecture.md):

- imports point downhill only: a module never imports a higher layer;
- packages talk through their faces: a module of one subpackage imports another only through its
  ``__init__`` (``from veriloop.sandbox import Limits``), never one of its modules
  (``veriloop.sandbox._bwrap``) and never an underscore name; a public subpackage
  (``veriloop.verifiers.audit``) is a face only through its ``__init__``;
- no two modules import each other, directly or round a longer loop (package ``__init__``
  modules left out: a face re-exports its own modules, which import their siblings through it).

Every import counts: top-level, inside functions and under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import veriloop

PACKAGE_ROOT = Path(veriloop.__file__).parent

LAYERS = {
    "core": 0,
    "sandbox": 1,
    "algorithms": 1,
    "verifiers": 2,
    "tasks": 2,
    "rollout": 3,
    "mcp": 3,
    "evaluation": 4,
    "scheduling": 4,
    "training": 5,
    "review": 5,
    "cli": 6,
    "integrations": 6,
    "__main__": 7,  # ``python -m veriloop`` (how torchrun starts it): the command line, above everything
}

FACE_EXCEPTIONS: set[tuple[str, str]] = set()
"""(importing module, imported module) pairs let through; each entry needs a comment saying why."""

ALLOWED_CYCLES: set[frozenset[str]] = set()  # each entry says why the two modules must import each other


def _modules(root: Path) -> dict[str, Path]:
    """``{dotted name: path}`` of every module under ``root`` (a package named by its folder)."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


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


def _subpackage(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "veriloop" and len(parts) >= 2 else None


def uphill_imports(root: Path) -> list[str]:
    """Every import under ``root`` of a higher layer, as ``path:line: ...``."""
    violations = []
    for module, path in _modules(root).items():
        own = _subpackage(module)
        if own is None:
            continue
        for line, imported, _ in _imports(path, module):
            target = _subpackage(imported)
            if target is not None and target != own and LAYERS[target] > LAYERS[own]:
                violations.append(
                    f"{path}:{line}: {own} (layer {LAYERS[own]}) imports {imported} (layer {LAYERS[target]})"
                )
    return violations


def test_every_subpackage_has_a_layer():
    subpackages = {p.name for p in PACKAGE_ROOT.iterdir() if (p / "__init__.py").exists()}
    assert subpackages <= set(LAYERS), f"give these a layer: {sorted(subpackages - set(LAYERS))}"


def test_imports_point_downhill():
    found = uphill_imports(PACKAGE_ROOT)
    assert not found, "\n".join(found)


def test_the_checker_sees_an_uphill_import(tmp_path):
    """The walker itself must catch an uphill import, relative or absolute."""
    root = tmp_path / "veriloop"
    (root / "core").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "core" / "_bad.py").write_text("from veriloop.cli import main\nfrom ..training import x\n")
    found = [line.split(": ", 1)[1] for line in uphill_imports(root)]
    assert found == [
        "core (layer 0) imports veriloop.cli (layer 6)",
        "core (layer 0) imports veriloop.training (layer 5)",
    ]


def private_reaches(root: Path) -> list[str]:
    """Every import, under ``root`` (the ``veriloop`` folder), of another subpackage's private
    module or underscore name, as ``path:line: imported``."""
    violations = []
    for module, path in _modules(root).items():
        own = _subpackage(module)
        for line, imported, names in _imports(path, module):
            parts = imported.split(".")
            if parts[0] != "veriloop" or len(parts) < 2 or parts[1] == own:
                continue
            if (module, imported) in FACE_EXCEPTIONS:
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


def _imported_modules(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of ``known`` that ``module`` imports anywhere in its source."""
    targets = set()
    for _, source, names in _imports(path, module):
        targets.add(source)
        # ``from package import module`` imports the module
        targets |= {f"{source}.{name}" for name in names if f"{source}.{name}" in known}
    return {t for t in targets if t in known and t != module and not module.startswith(t + ".")}


def import_cycles(root: Path) -> list[frozenset[str]]:
    """The import cycles among the non-``__init__`` modules under ``root`` (strongly connected
    components of more than one module, by Tarjan's algorithm)."""
    known = _modules(root)
    plain = {m for m, p in known.items() if p.name != "__init__.py"}
    graph = {m: _imported_modules(m, known[m], known) & plain for m in plain}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return cycles


def test_no_module_imports_itself_round_a_loop():
    found = [sorted(cycle) for cycle in import_cycles(PACKAGE_ROOT) if cycle not in ALLOWED_CYCLES]
    assert not found, "import cycles (move the shared piece where it belongs):\n" + "\n".join(map(str, found))


def test_the_checker_sees_a_cycle_through_a_function_level_import(tmp_path):
    package = tmp_path / "veriloop"
    (package / "sandbox").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sandbox" / "__init__.py").write_text("from veriloop.sandbox._a import A\n")
    (package / "sandbox" / "_a.py").write_text("def a():\n    from veriloop.sandbox._b import B\n")
    (package / "sandbox" / "_b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import _a\n"
    )
    (package / "sandbox" / "_c.py").write_text("from veriloop.sandbox import _a\n")
    assert import_cycles(package) == [frozenset({"veriloop.sandbox._a", "veriloop.sandbox._b"})]
