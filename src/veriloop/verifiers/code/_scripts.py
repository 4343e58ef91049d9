"""Building the self-contained scripts that run in sandboxed grading processes.

A script carries a few modules of ``sandboxed/`` (standard library only), concatenated (their
package imports, marked ``# sandbox: strip``, removed: ``sandbox/_shipped.py``), then one call with the job embedded
as JSON. Nothing from the host's Python environment is imported in the sandbox.

Compiling that harness source costs several milliseconds per run, more than the warm fork
that runs it, so the host compiles it once and ships the marshalled code object. Marshal's
format is tied to the interpreter's minor version: the script checks the sandbox's
interpreter and falls back to compiling the source when they differ.

Loading even the marshalled harness (decoding, unmarshalling, defining its functions) costs a
run about as much again, so the code sandboxes preload it (``harness_preload``): each defines the
harnesses once, before its first run, in the template every run is copied from, and a run's
script is then one import and the call. The harness is the host's own code and holds no job's
data, so no run learns anything of another from it; a run that changes it changes its own copy.
"""

from __future__ import annotations

import base64
import functools
import json
import marshal
import secrets
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from veriloop.sandbox import joined_source

_SANDBOXED = Path(__file__).parent / "sandboxed"
_SHARED = ("_wire", "_channel")
_HELPERS = {
    "_tests_process": ("_shipped_callables", "_expected_raises", "_test_units"),
    "_candidate_process": ("_shipped_callables",),
    "_audit_hook": ("_shipped_callables", "_candidate_process"),
}
"""Further modules a harness needs, sent after the shared ones."""


def new_nonce() -> str:
    """A fresh frame prefix for one run's result channel."""
    return "@" + secrets.token_hex(8) + " "


def compiled_blob(code: object) -> str:
    """A code object (or a tuple of them) as base64 text a same-version interpreter can load."""
    return base64.b64encode(marshal.dumps(code)).decode("ascii")


def interpreter_tag() -> str:
    """Names the bytecode format of this interpreter; compiled blobs load only under the same tag."""
    return f"{sys.implementation.cache_tag}:{sys.version_info[0]}.{sys.version_info[1]}"


_TAG_EXPRESSION = "f'{_sys.implementation.cache_tag}:{_sys.version_info[0]}.{_sys.version_info[1]}'"
TAG_PROBE = f"import sys as _sys\nprint({_TAG_EXPRESSION})\n"
"""A script printing the interpreter tag of wherever it runs (see ``interpreter_tag``)."""


_PRELOADED = ("_candidate_process", "_tests_process")
"""The harnesses the code sandboxes preload: those of every candidate run and test process."""


def _harness_source(module: str) -> str:
    return joined_source(_SANDBOXED, (*_SHARED, *_HELPERS.get(module, ()), module))


def preloaded_name(module: str) -> str:
    """The name under which a sandbox preloads harness ``module``."""
    return f"veriloop_harness{module}"


def harness_preload() -> dict[str, str]:
    """The ``preload`` of a code sandbox (``veriloop.sandbox.Sandbox``): module name -> source."""
    return {preloaded_name(module): _harness_source(module) for module in _PRELOADED}


@functools.cache
def _harness(module: str) -> tuple[str, str]:
    source = _harness_source(module)
    # dont_inherit: this module's ``from __future__ import annotations`` must not reach the
    # harness, whose compile() of the candidate's program would inherit it in turn.
    return source, compiled_blob(compile(source, f"<{module}>", "exec", dont_inherit=True, optimize=2))


def build_script(
    module: str,
    function: str,
    job: dict[str, Any],
    sandbox_tag: Callable[[], str | None],
    preloaded: frozenset[str] = frozenset(),
) -> str:
    """The script running ``module.function(job)`` in a bare interpreter (``module``: a file
    name in ``sandboxed/``, without ``.py``).

    When the sandbox preloads the harness (``preloaded_name(module)`` in ``preloaded``, its
    ``Sandbox.preloaded``), the script imports it; else, when ``sandbox_tag()`` (the sandbox
    interpreter's ``interpreter_tag``, asked only then: it may wait for a probe run) matches
    this one, the harness travels precompiled; otherwise as source.
    """
    payload = json.dumps(job, separators=(",", ":"))
    if preloaded_name(module) in preloaded:
        return f"from {preloaded_name(module)} import _json, {function}\n{function}(_json.loads({payload!r}))\n"
    source, blob = _harness(module)
    if sandbox_tag() == interpreter_tag():
        load = f"import base64 as _b64, marshal as _marshal\nexec(_marshal.loads(_b64.b64decode({blob!r})))\n"
    else:
        load = f"exec(compile({source!r}, {f'<{module}>'!r}, 'exec'))\n"
    return f"{load}{function}(_json.loads({payload!r}))\n"
