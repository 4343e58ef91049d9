"""The ``bwrap`` backend: a pool of local bubblewrap sandboxes, each a warm server process."""

from __future__ import annotations

import queue

from veriloop.core import ExecResult, UserError
from veriloop.sandbox._backend import BACKENDS, BackendSettings
from veriloop.sandbox._job import Job


@BACKENDS.register("bwrap")
class BwrapBackend:
    """A pool of bubblewrap sandboxes, each a warm server process; a job takes a free one."""

    def __init__(self, settings: BackendSettings):
        from veriloop.sandbox._bwrap import launch_for
        from veriloop.sandbox._python import find_python
        from veriloop.sandbox._server_handle import ServerHandle

        self.environment = None
        if settings.environment is not None:
            from veriloop.sandbox._environments import environment_python, load_environment

            if settings.python is not None:
                raise UserError("a sandbox on an environment runs the environment's python: give one of the two")
            self.environment = load_environment(settings.environment)
            python = environment_python(self.environment)
        else:
            python = find_python(settings.python)
        self._stamp = {"environment": self.environment.hash} if self.environment else None
        launch = launch_for(python, settings.limits, settings.network, preload=settings.preload)
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
