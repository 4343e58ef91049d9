"""Sandbox backends, by name: each turns a Job into an ExecResult, on ``workers`` at once.

A backend that cannot start, or loses its service, raises ``SandboxUnavailable``.
"""

from __future__ import annotations

import queue
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


class Backend(Protocol):
    """Runs jobs; ``execute`` is called from up to ``workers`` threads at once."""

    def execute(self, job: Job) -> ExecResult: ...

    def close(self) -> None: ...


BACKENDS: Registry[Callable[[BackendSettings], Backend]] = Registry("sandbox backend")


@BACKENDS.register("bwrap")
class BwrapBackend:
    """A pool of bubblewrap sandboxes, each a warm server process; a job takes a free one."""

    def __init__(self, settings: BackendSettings):
        from veriloop.sandbox._bwrap import launch_for
        from veriloop.sandbox._python import find_python
        from veriloop.sandbox._server_handle import ServerHandle

        self.environment = None
        if settings.environment is not None:
            from veriloop.sandbox._environments import load_environment
            from veriloop.sandbox._python import environment_python

            if settings.python is not None:
                raise UserError("a sandbox on an environment runs the environment's python: give one of the two")
            self.environment = load_environment(settings.environment)
            python = environment_python(self.environment)
        else:
            python = find_python(settings.python)
        self._stamp = {"environment": self.environment.hash} if self.environment else None
        launch = launch_for(python, settings.limits, settings.network)
        self._servers = [ServerHandle(launch, settings.limits) for _ in range(settings.workers)]
        self._idle: queue.SimpleQueue[ServerHandle] = queue.SimpleQueue()
        try:
            for server in self._servers:
                server.spawn()
            for server in self._servers:
                server.wait_ready()
                self._idle.put(server)
        except BaseException:
            self.close()
            raise

    def execute(self, job: Job) -> ExecResult:
        server = self._idle.get()
        try:
            result = server.execute(job)
        finally:
            self._idle.put(server)
        return result if self._stamp is None else result.model_copy(update=self._stamp)

    def close(self) -> None:
        for server in self._servers:
            server.shutdown()
