"""No two modules of veriloop import each other, directly or round a longer loop.

Every import counts: top-level, inside functions, and under ``TYPE_CHECKING``. A cycle means a
shared piece sits in the wrong module (docs/architecture.md). Package ``__init__`` modules are
left out: a face re-exports its own modules, which import their siblings through it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import veriloop

PACKAGE_ROOT = Path(veriloop.__file__).parent

ALLOWED_CYCLES: set[frozenset[str]] = set()  # each entry says why the two modules must import each other


def _modules(root: Path) -> dict[str, Path]:
    """``{dotted name: path}`` of every module under ``root`` (a package named by its folder)."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _imports(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of ``known`` that ``module`` imports anywhere in its source."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    targets = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            targets |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:  # ``from package import module`` imports the module
                targets.add(f"{source}.{alias.name}" if f"{source}.{alias.name}" in known else source)
    return {t for t in targets if t in known and t != module and not module.startswith(t + ".")}


def import_cycles(root: Path) -> list[frozenset[str]]:
    """The import cycles among the non-``__init__`` modules under ``root`` (strongly connected
    components of more than one module, by Tarjan's algorithm)."""
    known = _modules(root)
    plain = {m for m, p in known.items() if p.name != "__init__.py"}
    graph = {m: _imports(m, known[m], known) & plain for m in plain}
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
