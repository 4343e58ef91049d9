"""Source shipped into a sandbox: modules of a ``sandboxed/`` folder joined into one script.

Code that runs inside a sandbox is standard library only and is split into modules for its
readers. Each module imports the names it uses from its siblings on lines ending in
``# sandbox: strip``: they exist for readers and linters, since nothing of a ``sandboxed/``
folder is importable in the sandbox. The script is the modules' text in order with those lines
removed, one namespace as if it were one file; so a module may only use, at its top level,
names of the modules joined before it.
"""

from __future__ import annotations

import functools
from pathlib import Path

STRIP_MARKER = "# sandbox: strip"


@functools.cache
def module_source(folder: Path, name: str) -> str:
    """The text of ``folder/name.py`` without its ``# sandbox: strip`` lines."""
    lines = (folder / f"{name}.py").read_text(encoding="utf-8").splitlines()
    return "\n".join(line for line in lines if not line.endswith(STRIP_MARKER)) + "\n"


def joined_source(folder: Path, names: tuple[str, ...]) -> str:
    """The script made of the modules ``names`` of ``folder``, in that order: one namespace,
    without the lines ending in the strip marker (``# sandbox: strip``) by which a module imports
    its siblings. Read once per folder and name, then cached."""
    return "".join(module_source(folder, name) for name in names)


def bootstrap(source: str, name: str) -> str:
    """A ``python -c`` argument that compiles and runs ``source`` (as ``__main__``, named
    ``name`` in tracebacks). The interpreter's own compilation of a ``-c`` argument leaves its
    working memory pinned in the heap (2.8 MB for the sandbox server's 48 KB), and every
    process forked afterwards carries it; a string constant costs the parser nothing, and the memory
    ``compile()`` frees can be given back (``sandboxed/_server.py``'s ``release_free_heap``)."""
    return f"exec(compile({source!r}, {name!r}, 'exec'))\n"
