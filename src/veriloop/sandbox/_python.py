"""Which Python interpreter runs inside the sandbox, and what of it the sandbox may see.

The sandbox gets a base interpreter with its standard library only: never the project's
virtual environment, and every site-packages directory of that interpreter is covered by an
empty read-only mount. Prefer the system's ``/usr/bin/python3``: it lives under ``/usr``,
which every sandbox mounts read-only anyway.
"""

from __future__ import annotations

import functools
import json
import os
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from veriloop.core import UserError

_PROBE = (
    "import json, site, sys, sysconfig;"
    "p = sysconfig.get_paths();"
    "print(json.dumps({'prefix': sys.prefix, 'base_prefix': sys.base_prefix,"
    " 'exec_prefix': sys.exec_prefix, 'executable': sys.executable,"
    " 'version': '%d.%d.%d' % sys.version_info[:3], 'hex': sys.hexversion,"
    " 'site': sorted(set(site.getsitepackages() + [p['purelib'], p['platlib']]))}))"
)
_CANDIDATES = ("/usr/bin/python3", "/usr/local/bin/python3")
_MIN_VERSION = 0x03090000  # the sandbox server needs os.pidfd_open


@dataclass(frozen=True)
class SandboxPython:
    """An interpreter as the sandbox sees it (same paths as on the host)."""

    executable: str
    version: str
    binds: tuple[str, ...]  # directories outside /usr to mount read-only
    hidden: tuple[str, ...]  # site-packages directories covered by an empty mount
    warm: tuple[str, ...] = ()  # modules to import before the first run, beyond the standard ones
    links: tuple[tuple[str, str], ...] = ()  # (path, target): links its environment adds to the root
    variables: tuple[tuple[str, str], ...] = ()  # (name, value): variables its environment sets in every run


def _world_reachable(path: Path) -> bool:
    """Whether a user without privileges can reach ``path`` (read and search every parent)."""
    for part in [path, *path.parents]:
        try:
            mode = part.stat().st_mode
        except OSError:
            return False
        if not mode & stat.S_IXOTH:
            return False
    return True


def _inspect(executable: str) -> SandboxPython:
    try:
        out = subprocess.run(
            [executable, "-I", "-c", _PROBE], capture_output=True, text=True, timeout=30, check=True
        ).stdout
        info = json.loads(out)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        raise UserError(f"sandbox python {executable!r} does not run: {exc}") from None
    if info["prefix"] != info["base_prefix"]:
        raise UserError(
            f"sandbox python {executable!r} belongs to a virtual environment ({info['prefix']}); "
            "give the base interpreter instead, so the sandbox never sees an environment's packages"
        )
    if info["hex"] < _MIN_VERSION:
        raise UserError(f"sandbox python {executable!r} is {info['version']}; it needs 3.9 or newer")
    roots = {os.path.realpath(info["prefix"]), os.path.realpath(info["exec_prefix"])}
    binds = tuple(sorted(r for r in roots if r != "/usr" and not r.startswith("/usr/")))
    if os.geteuid() == 0:
        private = [r for r in (*binds, os.path.realpath(executable)) if not _world_reachable(Path(r))]
        if private:
            raise UserError(
                f"sandbox python {executable!r} is not readable by unprivileged users ({private[0]}); "
                "pass an interpreter installed under a world-readable prefix, such as /usr/bin/python3"
            )
    visible = ("/usr", *binds)
    hidden = tuple(
        d for d in info["site"] if os.path.isdir(d) and any(d == v or d.startswith(v + "/") for v in visible)
    )
    return SandboxPython(executable=executable, version=info["version"], binds=binds, hidden=hidden)


@functools.lru_cache(maxsize=8)
def find_python(explicit: str | None = None) -> SandboxPython:
    """The interpreter for sandboxes: ``explicit``, else the first usable system python3.

    Raises UserError naming what to do when none is usable.
    """
    if explicit is not None:
        return _inspect(explicit)
    problems = []
    base = os.path.join(sys.base_prefix, "bin", "python3")
    for candidate in (*_CANDIDATES, base):
        if os.path.exists(candidate):
            try:
                return _inspect(candidate)
            except UserError as exc:
                problems.append(str(exc))
    raise UserError(
        "no Python interpreter usable inside the sandbox"
        + (f" ({'; '.join(problems)})" if problems else "")
        + "; install one (apt-get install python3) or pass python=PATH"
    )
