"""Environments: named, content-hashed, read-only layers of pre-installed packages for sandboxes.

An environment is a virtual environment made with the sandbox's own interpreter (the system
``python3``, never the project's) and filled by pip from the package registry. It lives in the
environment store (``VERILOOP_ENV_DIR``, else ``~/.cache/veriloop/envs``, or
``/var/cache/veriloop/envs`` for root, whose home no sandbox user may enter) as a directory
``NAME.XXXXXXXX`` beside its manifest ``NAME.json``. A sandbox on it mounts the directory
read-only at the same path (its scripts name their interpreter by that path), runs the server
with its interpreter, and pre-imports the modules the manifest lists (``warm``), so that a run's
``import numpy`` finds the module loaded already.

The hash covers every file of the environment but its bytecode caches (derived from the sources,
and stamped with their build time), with the environment's own path written as ``<env>``: two
builds that installed the same files have the same hash. It is recorded on every ExecResult
of a sandbox on the environment, and on the scores and trajectories made there.

An environment may also add links to the sandbox's root and variables to its runs (a container
image's working directory and ``ENV``, ``_environment_layout.py``); both are in the manifest
and in the hash.

Rebuilding a name makes a new directory and then points the manifest at it; the old directory is
removed, so sandboxes still running on it see their files go.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from veriloop.core import UserError, atomic_write
from veriloop.sandbox._environment_layout import check_links, check_variables
from veriloop.sandbox._python import SandboxPython, find_python

ENV_DIR_VARIABLE = "VERILOOP_ENV_DIR"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")
_PLACEHOLDER = b"<env>"
_SKIPPED = ("__pycache__",)

# Run with the environment's interpreter: every installed distribution, and the import names of
# the ones asked for (top_level.txt, else the top-level modules and packages of their RECORD).
_PROBE = r"""
import importlib.metadata as md, json, re, sys
wanted = {re.sub(r"[-_.]+", "-", n).lower() for n in sys.argv[1:]}
installed, tops = [], []
for dist in md.distributions():
    name = dist.metadata["Name"] or ""
    installed.append("%s==%s" % (name, dist.version))
    if re.sub(r"[-_.]+", "-", name).lower() not in wanted:
        continue
    text = dist.read_text("top_level.txt")
    names = text.split() if text else []
    if not names:
        for entry in dist.files or ():
            parts = entry.parts
            if len(parts) == 1 and parts[0].endswith(".py"):
                names.append(parts[0][:-3])
            elif len(parts) == 2 and parts[1] == "__init__.py":
                names.append(parts[0])
    tops += [n for n in names if n.isidentifier() and not n.startswith("_")]
print(json.dumps({"installed": sorted(installed, key=str.lower), "tops": sorted(set(tops)),
                  "version": "%d.%d.%d" % sys.version_info[:3]}))
"""


@dataclass(frozen=True)
class Environment:
    """A built environment, as its manifest records it."""

    name: str
    hash: str  # sha256 of its files (see the module's docstring)
    path: str  # the directory on the host, mounted read-only at the same path
    python_version: str
    base_python: str  # the interpreter it was made with, which the sandbox mounts
    packages: tuple[str, ...]  # what was asked for (requirement specifiers)
    installed: tuple[str, ...]  # NAME==VERSION of every distribution in it
    warm: tuple[str, ...]  # modules a sandbox's warm interpreter imports before its first run
    size_bytes: int
    built_at: str
    links: dict[str, str] = field(default_factory=dict)  # path in the sandbox -> target (_environment_layout.py)
    variables: dict[str, str] = field(default_factory=dict)  # set in every run on it

    @property
    def python(self) -> str:
        return f"{self.path}/bin/python"

    @property
    def short_hash(self) -> str:
        return self.hash[:12]


def environment_store() -> Path:
    """Where environments live (see the module's docstring)."""
    chosen = os.environ.get(ENV_DIR_VARIABLE)
    if chosen:
        return Path(chosen).expanduser().absolute()
    if os.geteuid() == 0:
        return Path("/var/cache/veriloop/envs")
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "veriloop" / "envs"


def check_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise UserError(
            f"environment name {name!r}: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
        )
    return name


def build_command(name: str, packages: Sequence[str] = ()) -> str:
    """The command that builds ``name``: with ``packages`` when they are known, else a placeholder."""
    return f"veriloop env build {name} {' '.join(packages) or '--packages PACKAGE...'}"


def load_environment(name: str, packages: Sequence[str] = ()) -> Environment:
    """The environment called ``name``; UserError naming the build command when there is none
    (with ``packages``, the packages the caller knows it needs, spelled out in that command)."""
    check_name(name)
    manifest = environment_store() / f"{name}.json"
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
        environment = Environment(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})
    except FileNotFoundError:
        raise UserError(
            f"environment {name!r} is not built (in {manifest.parent}); build it with `{build_command(name, packages)}`"
        ) from None
    except (OSError, ValueError, TypeError) as exc:
        raise UserError(
            f"{manifest}: not an environment manifest ({exc}); rebuild it with `{build_command(name, packages)}`"
        ) from None
    if not os.path.isfile(environment.python):
        raise UserError(
            f"environment {name!r}: {environment.path} is gone; rebuild it with `{build_command(name, packages)}`"
        )
    return environment


def environment_python(environment: Environment) -> SandboxPython:
    """The interpreter of ``environment`` as the sandbox sees it: its base interpreter's mounts,
    plus the environment's directory (read-only, its site-packages visible)."""
    base = find_python(environment.base_python)
    return replace(
        base,
        executable=environment.python,
        binds=(*base.binds, environment.path),
        warm=environment.warm,
        links=tuple(environment.links.items()),
        variables=tuple(environment.variables.items()),
    )


def environment_hashes(names) -> dict[str, str]:
    """``{name: hash}`` of the named environments (a missing one is a UserError naming its build)."""
    return {name: load_environment(name).hash for name in sorted(set(names))}


def list_environments() -> list[Environment]:
    """Every built environment in the store, by name; a manifest whose directory is gone is left out."""
    root = environment_store()
    if not root.is_dir():
        return []
    found = []
    for manifest in sorted(root.glob("*.json")):
        try:
            found.append(load_environment(manifest.stem))
        except UserError:
            continue  # a manifest without its directory, or another file: not an environment
    return found


def remove_environment(name: str) -> Environment:
    """Delete ``name``'s manifest, then its directory."""
    environment = load_environment(name)
    (environment_store() / f"{name}.json").unlink()
    _remove_tree(Path(environment.path))
    return environment


def environment_hash(path: Path, links: dict[str, str] | None = None, variables: dict[str, str] | None = None) -> str:
    """sha256 over the environment's entries in path order: name, kind, executable bit, content
    (link targets for links), with ``path`` itself written as ``<env>``; then its ``links`` and
    ``variables``, when it has any (so an environment without them hashes as before they existed)."""
    digest = hashlib.sha256()
    own = str(path).encode()
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if d not in _SKIPPED)
        for name in sorted(files) + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            full = os.path.join(root, name)
            relative = os.path.relpath(full, path).encode()
            info = os.lstat(full)
            if stat.S_ISLNK(info.st_mode):
                kind, content = b"l", os.readlink(full).encode()
            elif stat.S_ISREG(info.st_mode):
                kind = b"x" if info.st_mode & 0o111 else b"f"
                with open(full, "rb") as handle:
                    content = handle.read()
            else:
                continue
            content = content.replace(own, _PLACEHOLDER)
            digest.update(b"%s\0%s\0%d\0" % (relative, kind, len(content)))
            digest.update(content)
    if links or variables:
        layout = json.dumps({"links": links or {}, "variables": variables or {}}, sort_keys=True)
        digest.update(b"\0layout\0" + layout.encode())
    return digest.hexdigest()


def build_environment(
    name: str,
    packages: Sequence[str] = (),
    requirements: Path | None = None,
    *,
    warm: Sequence[str] | None = None,
    python: str | None = None,
    log: Callable[[str], None] = lambda line: None,
    links: dict[str, str] | None = None,
    variables: dict[str, str] | None = None,
) -> Environment:
    """Build ``name`` from the package registry and return it (UserError when pip fails).

    ``warm`` lists the modules to pre-import (default: the import names of ``packages`` and of
    the requirement file's packages); every one must import in the new environment. ``links``
    and ``variables`` shape every sandbox on it (``_environment_layout.py``); with either, the
    environment may hold no packages.
    """
    check_name(name)
    links, variables = check_links(links or {}), check_variables(variables or {})
    specifiers = [*packages, *(_requirement_names(requirements) if requirements else ())]
    if not specifiers and not links and not variables:
        raise UserError("env build: give --packages PACKAGE... or --requirements FILE")
    base = find_python(python)
    root = environment_store()
    _make_store(root)
    target = root / f"{name}.{secrets.token_hex(4)}"
    try:
        _run([base.executable, "-I", "-m", "venv", "--without-pip", str(target)], "make the virtual environment", log)
        for script in (target / "bin").glob("[aA]ctivate*"):
            script.unlink()  # for shells, not sandboxes; they name the directory, so no two builds would hash alike
        if specifiers:
            pip = [sys.executable, "-m", "pip", "--python", f"{target}/bin/python", "install", "--no-input"]
            pip += ["--disable-pip-version-check", "--progress-bar", "off", *packages]
            if requirements is not None:
                pip += ["-r", str(requirements)]
            _run(pip, "install the packages", log)
        probe = _probe(target, [_project_name(s) for s in specifiers])
        modules = tuple(warm) if warm is not None else tuple(probe["tops"])
        _check_imports(target, modules)
        _publish_readable(target)
        environment = Environment(
            name=name,
            hash=environment_hash(target, links, variables),
            path=str(target),
            python_version=probe["version"],
            base_python=base.executable,
            packages=tuple(specifiers),
            installed=tuple(probe["installed"]),
            warm=modules,
            size_bytes=_tree_size(target),
            built_at=datetime.now(UTC).isoformat(timespec="seconds"),
            links=links,
            variables=variables,
        )
    except BaseException:
        _remove_tree(target)
        raise
    previous = None
    try:
        previous = load_environment(name)
    except UserError:
        pass
    with atomic_write(root / f"{name}.json") as handle:
        handle.write(json.dumps(asdict(environment), indent=2) + "\n")
    if previous is not None and previous.path != environment.path:
        _remove_tree(Path(previous.path))
    return environment


def _make_store(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        for part in [root, *root.parents]:  # bubblewrap runs as nobody: it must reach the store
            if not part.stat().st_mode & stat.S_IXOTH:
                raise UserError(
                    f"environment store {root}: {part} is not reachable by unprivileged users, whom the "
                    f"sandbox runs as; choose a world-readable place with {ENV_DIR_VARIABLE}"
                )


def _run(argv: list[str], what: str, log: Callable[[str], None]) -> None:
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as process:
        assert process.stdout is not None
        tail: list[str] = []
        for line in process.stdout:
            line = line.rstrip("\n")
            if line.startswith("WARNING: Location "):  # pip's notes about find-links folders it skips
                continue
            tail = (tail + [line])[-20:]
            log(line)
    if process.returncode != 0:
        detail = "\n".join(tail[-8:])
        raise UserError(f"env build: could not {what} (exit code {process.returncode}):\n{detail}")


def _probe(target: Path, names: list[str]) -> dict:
    done = subprocess.run(
        [f"{target}/bin/python", "-I", "-c", _PROBE, *names], capture_output=True, text=True, timeout=120
    )
    if done.returncode != 0:
        raise UserError(f"env build: the new environment's python does not run: {done.stderr.strip()[-400:]}")
    return json.loads(done.stdout)


def _check_imports(target: Path, modules: Sequence[str]) -> None:
    for module in modules:
        if not all(part.isidentifier() for part in module.split(".")):
            raise UserError(f"env build: {module!r} is not a module name")
    code = "import importlib, sys\nfor name in sys.argv[1:]:\n    importlib.import_module(name)\n"
    done = subprocess.run(
        [f"{target}/bin/python", "-I", "-c", code, *modules], capture_output=True, text=True, timeout=600
    )
    if done.returncode != 0:
        last = done.stderr.strip().splitlines()[-1:] or ["no error text"]
        raise UserError(f"env build: a module to pre-import does not import: {last[0]} (choose others with --warm)")


def _requirement_names(requirements: Path) -> list[str]:
    try:
        lines = requirements.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise UserError(f"--requirements {requirements}: {exc.strerror or exc}") from None
    names = []
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            names.append(line)
    return names


def _project_name(specifier: str) -> str:
    """The project name a requirement specifier installs (``numpy>=2`` -> ``numpy``; a wheel's
    path or URL -> the name in its file name)."""
    if specifier.endswith(".whl") or "/" in specifier:
        specifier = specifier.rstrip("/").rsplit("/", 1)[-1].split("-", 1)[0]
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", specifier)
    return match.group(1) if match else specifier


def _publish_readable(target: Path) -> None:
    """Every file readable and every directory searchable by all (the sandbox user is nobody's)."""
    for root, dirs, files in os.walk(target):
        for name in dirs + files:
            path = os.path.join(root, name)
            info = os.lstat(path)
            if not stat.S_ISLNK(info.st_mode):
                extra = 0o555 if stat.S_ISDIR(info.st_mode) or info.st_mode & 0o111 else 0o444
                os.chmod(path, (info.st_mode & 0o7777 | extra) & ~0o022)
    os.chmod(target, 0o755)


def _tree_size(target: Path) -> int:
    total = 0
    for root, _, files in os.walk(target):
        for name in files:
            total += os.lstat(os.path.join(root, name)).st_size
    return total


def _remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
