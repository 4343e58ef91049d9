"""Sandbox backends, by name: each turns a Job into an ExecResult, on ``workers`` at once.

This module holds the contract (``Backend``, ``BackendSettings``, ``SandboxUnavailable``) and the
registry; the backends register themselves: ``bwrap`` in ``_bwrap_backend.py``, ``remote`` in
``_remote.py``. A backend that cannot start, or loses its service, raises ``SandboxUnavailable``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from veriloop.core import ExecResult, Registry, UserError
from veriloop.sandbox._job import Job
from veriloop.sandbox._limits import Limits


class SandboxUnavailable(UserError):
    """The sandbox cannot start or be reached here (bubblewrap missing, user namespaces disabled,
    a service down or refusing the token, ...)."""


@dataclass(frozen=True)
class BackendSettings:
    """What a backend is built from; each backend reads the fields it needs."""

    limits: Limits
    workers: int
    network: bool = False
    python: str | None = None  # bwrap: host path of the interpreter used inside
    url: str | None = None  # remote: the service's base URL
    token: str | None = None  # remote: bearer token
    environment: str | None = None  # bwrap: the name of a built environment to run on
    preload: tuple[tuple[str, str], ...] = ()  # bwrap: (module name, source) defined before every run


class Backend(Protocol):
    """Runs jobs; ``execute`` is called from up to ``workers`` threads at once."""

    def execute(self, job: Job) -> ExecResult: ...

    def close(self) -> None: ...


BACKENDS: Registry[Callable[[BackendSettings], Backend]] = Registry("sandbox backend")
