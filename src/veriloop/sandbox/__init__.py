"""Layer 1: isolated, limited, fast execution of model-written code.

    from veriloop.sandbox import Sandbox, Limits, ExecResult
    with Sandbox(limits=Limits(timeout_s=5, memory_mb=256), workers=2) as sb:
        sb.run(["python3", "-c", "print(1)"], files={"a.txt": "..."}, stdin="")
        sb.run_python("print(1)")            # a warm interpreter, forked per run
        sb.map_python(["print(1)", ...])     # all workers busy, results in order
        await sb.arun_python("print(1)")

Backends are registered by name in ``BACKENDS``: ``bwrap`` (local bubblewrap sandboxes) and
``remote`` (a ``veriloop sandbox serve`` service). ``run_code`` runs source in any language
of ``LANGUAGES``; ``create_app`` is the HTTP service (SandboxFusion's ``/run_code``).
"""

from veriloop.core import ExecResult, Snapshot
from veriloop.sandbox import _bwrap_backend, _remote  # noqa: F401  (register the "bwrap" and "remote" backends)
from veriloop.sandbox._backend import BACKENDS, Backend, BackendSettings, SandboxUnavailable
from veriloop.sandbox._bwrap import open_shell
from veriloop.sandbox._environment_layout import check_links, check_variables
from veriloop.sandbox._environments import (
    Environment,
    build_environment,
    environment_hashes,
    environment_store,
    list_environments,
    load_environment,
    remove_environment,
)
from veriloop.sandbox._isolated_process import start_isolated_process
from veriloop.sandbox._job import Job
from veriloop.sandbox._languages import LANGUAGES, Build, CodeRun, Language, build_code, run_code
from veriloop.sandbox._limits import Limits
from veriloop.sandbox._sandbox import Sandbox
from veriloop.sandbox._service import create_app, is_loopback
from veriloop.sandbox._shipped import joined_source

__all__ = [
    "BACKENDS",
    "LANGUAGES",
    "Backend",
    "BackendSettings",
    "Build",
    "CodeRun",
    "ExecResult",
    "Job",
    "Language",
    "Limits",
    "Sandbox",
    "SandboxUnavailable",
    "Snapshot",
    "build_code",
    "create_app",
    "run_code",
    "Environment",
    "build_environment",
    "check_links",
    "check_variables",
    "environment_hashes",
    "environment_store",
    "list_environments",
    "load_environment",
    "remove_environment",
    "is_loopback",
    "joined_source",
    "open_shell",
    "start_isolated_process",
]
