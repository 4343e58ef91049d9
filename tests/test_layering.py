"""Imports point downhill only (docs/architecture.md): a module never imports a higher layer."""

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
    "evaluation": 4,
    "scheduling": 4,
    "training": 5,
    "review": 5,
    "cli": 6,
    "integrations": 6,
    "__main__": 7,  # ``python -m veriloop`` (how torchrun starts it): the command line, above everything
}


def _subpackage(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "veriloop" or len(parts) < 2:
        return None
    return parts[1]


def _imported_modules(path: Path, own_module: str) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    package = own_module if path.name == "__init__.py" else own_module.rpartition(".")[0]
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


def _modules():
    for path in sorted(PACKAGE_ROOT.rglob("*.py")):
        relative = path.relative_to(PACKAGE_ROOT.parent).with_suffix("")
        parts = list(relative.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield path, ".".join(parts)


def test_every_subpackage_has_a_layer():
    subpackages = {p.name for p in PACKAGE_ROOT.iterdir() if (p / "__init__.py").exists()}
    assert subpackages <= set(LAYERS), f"give these a layer: {sorted(subpackages - set(LAYERS))}"


def test_imports_point_downhill():
    violations = []
    for path, module in _modules():
        own = _subpackage(module)
        if own is None:
            continue
        for line, imported in _imported_modules(path, module):
            target = _subpackage(imported)
            if target is None or target == own:
                continue
            if LAYERS[target] > LAYERS[own]:
                violations.append(
                    f"{path}:{line}: {own} (layer {LAYERS[own]}) imports {imported} (layer {LAYERS[target]})"
                )
    assert not violations, "\n".join(violations)


def test_the_checker_sees_an_uphill_import(tmp_path):
    """The walker itself must catch an uphill import, relative or absolute."""
    fake = tmp_path / "veriloop" / "core"
    fake.mkdir(parents=True)
    (fake / "_bad.py").write_text("from veriloop.cli import main\nfrom ..training import x\n")
    imported = [name for _, name in _imported_modules(fake / "_bad.py", "veriloop.core._bad")]
    assert imported == ["veriloop.cli", "veriloop.training"]
