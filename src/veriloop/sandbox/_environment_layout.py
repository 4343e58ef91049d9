"""What an environment adds to the sandbox's file tree and variables: links and variables.

A container image can make its working directory ``/app`` and set variables; tasks written for
one name those paths in their prompts, tests and solutions. An environment may therefore carry

- ``links``: ``{path: target}``, each path a symbolic link in the sandbox's root pointing at a
  place the sandbox may write (``/workspace`` or below, ``/tmp`` or below), so ``/app`` can be
  the workspace itself. The sandbox's own places (``/workspace``, ``/tmp``, ``/usr``, ``/etc``,
  ``/proc``, ``/dev``, ...) and what lies inside them cannot be linked over; a link's missing
  parent folders are made, read-only like the rest of the root;
- ``variables``: ``{name: value}`` set in every run, beside the sandbox's own (``PATH``,
  ``HOME``, ``TMPDIR``, ... which they may not replace); values are taken as written, nothing
  in them is expanded.

Both are checked when an environment is built (``check_links``, ``check_variables``) and
count in its hash.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import PurePosixPath

from veriloop.core import UserError

SANDBOX_PLACES = ("/workspace", "/tmp", "/dev", "/proc", "/etc", "/usr", "/bin", "/sbin", "/preload")
"""Places the sandbox mounts itself (with ``/lib*``): a link may not sit on, in or above one."""
WRITABLE = ("/workspace", "/tmp")
"""Where a link may point: the run's own writable places."""
SANDBOX_VARIABLES = frozenset(
    {"PATH", "HOME", "TMPDIR", "LANG", "USER", "PYTHONDONTWRITEBYTECODE", "OPENBLAS_NUM_THREADS"}
    | {"OMP_NUM_THREADS", "MKL_NUM_THREADS"}
)
"""Variables the sandbox sets for every run, which an environment may not replace."""
_SYSTEM_LIBRARIES = ("lib", "lib32", "lib64", "libx32")
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _inside(path: str, place: str) -> bool:
    return path == place or path.startswith(place.rstrip("/") + "/")


def _absolute(path: str, what: str) -> str:
    if not isinstance(path, str) or not path.startswith("/") or "\x00" in path:
        raise UserError(f"{what} {path!r} must be an absolute path")
    normal = str(PurePosixPath(path))
    if normal != (path.rstrip("/") or "/") or ".." in PurePosixPath(path).parts or path.startswith("//"):
        raise UserError(f"{what} {path!r} must be in normal form, without '..' (write {normal!r})")
    return normal


def check_links(links: Mapping[str, str]) -> dict[str, str]:
    """``links`` with their paths checked (see the module's docstring); UserError naming the bad one."""
    checked: dict[str, str] = {}
    for path, target in links.items():
        path = _absolute(path, "link")
        target = _absolute(target, f"link {path}: target")
        if path == "/" or PurePosixPath(path).parts[1] in _SYSTEM_LIBRARIES:
            raise UserError(f"link {path}: the sandbox's system folders cannot be linked over")
        if clash := next((p for p in SANDBOX_PLACES if _inside(path, p) or _inside(p, path)), None):
            raise UserError(f"link {path}: {clash} is the sandbox's own; choose a path outside it")
        if not any(_inside(target, place) for place in WRITABLE):
            raise UserError(f"link {path}: its target {target} must be in /workspace or /tmp")
        if other := next((p for p in checked if _inside(path, p) or _inside(p, path)), None):
            raise UserError(f"link {path}: it overlaps the link {other}")
        checked[path] = target
    return dict(sorted(checked.items()))


def check_variables(variables: Mapping[str, str]) -> dict[str, str]:
    """``variables`` checked: names of letters, digits and '_', none of the sandbox's own, text values."""
    for name, value in variables.items():
        if not isinstance(name, str) or not _VARIABLE.match(name):
            raise UserError(f"variable {name!r}: a name is letters, digits and '_', not starting with a digit")
        if name in SANDBOX_VARIABLES or name.startswith("VERILOOP_"):
            raise UserError(f"variable {name}: the sandbox sets it for every run; an environment cannot replace it")
        if not isinstance(value, str) or "\x00" in value:
            raise UserError(f"variable {name}: its value must be text without NUL bytes")
    return dict(sorted(variables.items()))


def link_arguments(links: Mapping[str, str]) -> list[str]:
    """bubblewrap's arguments that make ``links`` in the sandbox's root: each missing parent as a
    folder (mode 0755), then the link."""
    args: list[str] = []
    made: set[str] = set()
    for path, target in sorted(links.items()):
        for parent in reversed(PurePosixPath(path).parents[:-1]):
            if str(parent) not in made:
                made.add(str(parent))
                args += ["--perms", "0755", "--dir", str(parent)]
        args += ["--symlink", target, path]
    return args
