"""An OpenEnv environment's server started from its app, in the sandbox, for one episode.

A task may name the environment as an ASGI app to start (``module:attribute``, or
``module:factory()``) on a built environment (``veriloop env build``) instead of a running
server's address. The model's actions are untrusted input to that server, so it runs in the
sandbox's isolated process (``veriloop.sandbox.start_isolated_process``: the environment's
packages alone, no network, nothing of the host writable, the limits given). uvicorn serves the
app there on a Unix socket (``in_environment/_serve_app.py``) in a host directory bound into the box,
the one way in, the box having no network; the client reaches it as ``unix:///PATH``.

One server per episode, not per batch, although openenv-core's ``/ws`` gives each connection
an environment of its own: the instances of one server share a process, so one episode's
actions could reach the next through module state, exhaust the memory or file limits they
share, or crash the server under the others. A server of its own makes each episode's
environment a stranger to every other's, and each failure its own episode's (the cost: the
server's start, ~1-3 s, once per episode).

``AppServer`` is a context manager; leaving it kills the box (every process in it) and removes
the socket's directory: nothing of the episode is left. A server that exits, or does not listen
within ``start_timeout_s``, raises ``OpenEnvError`` naming the app and the tail of its stderr.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from veriloop.core import UserError
from veriloop.sandbox import Limits, SandboxUnavailable, start_isolated_process
from veriloop.verifiers.openenv._protocol import OpenEnvError, OpenEnvSession

STDERR_TAIL_BYTES = 4000
_SERVE_APP = (Path(__file__).parent / "in_environment" / "_serve_app.py").read_text()
_SOCKET_DIR = "/openenv"  # where the box sees the socket's host directory
_SOURCE_DIR = "/openenv-app"  # where the box sees the app's source directory, when given
APP_DIR = "{app_dir}"
"""In a value of the server's variables: the path where the box sees the app's source directory."""
_POLL_S = 0.02
_SETTLE_S = 2.0  # how long a broken session waits for its server's end, to report it


class AppServer:
    """The server of ``app`` on ``environment`` in the sandbox, for as long as the context lasts.

    ``address`` is its ``unix:///PATH`` once started. ``source_dir`` (a host directory, mounted
    read-only) comes first on the app's ``sys.path``, for an app that is not a package of the
    environment. ``variables`` are added to the server's environment (after the box's own), each
    ``{app_dir}`` in a value replaced by the path where the box sees ``source_dir``: how a server
    that reads its settings from variables finds data shipped beside its source. The box's
    ``/tmp``, also its ``HOME`` and ``TMPDIR``, is its one writable place (``limits.disk_mb``)."""

    def __init__(
        self,
        app: str,
        environment: str,
        limits: Limits,
        *,
        source_dir: str | None = None,
        variables: Mapping[str, str] | None = None,
        start_timeout_s: float = 60.0,
    ):
        self.app = app
        self.environment = environment
        self.limits = limits
        self.source_dir = source_dir
        self.variables = dict(variables or {})
        self.start_timeout_s = start_timeout_s
        self.process: subprocess.Popen[bytes] | None = None
        self._folder: str | None = None
        self._stderr_tail = b""
        self._drain: threading.Thread | None = None

    @property
    def socket_path(self) -> str:
        assert self._folder is not None
        return os.path.join(self._folder, "server.sock")

    @property
    def address(self) -> str:
        return f"unix://{self.socket_path}"

    def __enter__(self) -> AppServer:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Start the box and wait until the app listens (OpenEnvError when it does not)."""
        self._folder = tempfile.mkdtemp(prefix="veriloop-openenv-")
        argv = ["python", "-I", "-c", _SERVE_APP, self.app, f"{_SOCKET_DIR}/server.sock"]
        ro_binds = {}
        if self.source_dir is not None:
            if not os.path.isdir(self.source_dir):
                raise OpenEnvError(f"{self.where}: its source directory {self.source_dir} does not exist")
            ro_binds[self.source_dir] = _SOURCE_DIR
            argv.append(_SOURCE_DIR)
        try:
            self.process = start_isolated_process(
                argv,
                self.limits,
                env={name: value.replace(APP_DIR, _SOURCE_DIR) for name, value in self.variables.items()},
                keep_stderr=True,
                environment=self.environment,
                binds={self._folder: _SOCKET_DIR},
                ro_binds=ro_binds,
            )
        except (SandboxUnavailable, UserError) as exc:  # no box here, or the environment is not built
            raise OpenEnvError(f"{self.where} did not start: {exc}") from None
        self._drain = threading.Thread(target=self._drain_stderr, name="openenv-app-stderr", daemon=True)
        self._drain.start()
        self._wait_until_listening()

    @property
    def where(self) -> str:
        return f"the OpenEnv app {self.app} (environment {self.environment})"

    def _wait_until_listening(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise OpenEnvError(f"{self.where} did not start: {self.ending()}")
            if self._accepts():
                return
            time.sleep(_POLL_S)
        self.kill()
        raise OpenEnvError(f"{self.where} did not start within {self.start_timeout_s:g} s: {self.ending()}")

    def _accepts(self) -> bool:
        if not os.path.exists(self.socket_path):
            return False
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            try:
                probe.connect(self.socket_path)
            except OSError:
                return False
        return True

    def _drain_stderr(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        while chunk := self.process.stderr.read1(1 << 12):
            self._stderr_tail = (self._stderr_tail + chunk)[-STDERR_TAIL_BYTES:]

    def ending(self, running: str = "it is not listening") -> str:
        """How the server ended (``running`` while it runs) and the end of its stderr."""
        assert self.process is not None
        status = self.process.poll()
        if status is None:
            reason = running
        elif status > 128 and status - 128 in signal.valid_signals():
            reason = f"it was killed ({signal.Signals(status - 128).name}; its CPU or memory limit, or a crash)"
        else:
            reason = f"it exited with status {status}"
        if self._drain is not None and status is not None:
            self._drain.join(timeout=1.0)
        tail = self._stderr_tail.decode("utf-8", errors="replace").strip()
        return f"{reason}; its stderr ended with: {tail[-1500:]}" if tail else f"{reason}, with nothing on stderr"

    def kill(self) -> None:
        """Kill the box (bubblewrap, and with it every process of the box) and reap it."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
        if self.process is not None:
            self.process.wait()

    def close(self) -> None:
        """Kill the box and remove the socket's directory; safe to call again."""
        self.kill()
        if self._drain is not None:
            self._drain.join(timeout=1.0)
        if self.process is not None:
            for pipe in (self.process.stdin, self.process.stdout, self.process.stderr):
                if pipe is not None:
                    pipe.close()
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None


class AppServerSession(OpenEnvSession):
    """A session on ``server``: when the session breaks (the server closed it, crashed, or did not
    answer in time), the error also says how the server ended and quotes the end of its stderr."""

    def __init__(self, server: AppServer, timeout_s: float = 30.0):
        self.server = server
        super().__init__(server.address, timeout_s)

    def _ask(self, message: dict[str, Any], expected: str) -> dict[str, Any]:
        try:
            return super()._ask(message, expected)
        except OpenEnvError as exc:
            if exc.code is not None:  # the environment answered with an error of the protocol
                raise
            process = self.server.process
            if process is not None:
                try:  # a crash closes the socket a moment before the process is gone
                    process.wait(timeout=_SETTLE_S)
                except subprocess.TimeoutExpired:
                    pass
            ending = self.server.ending(running="it is still running")
            raise OpenEnvError(f"{exc}; {self.server.where}: {ending}", exc.code, exc.detail) from None
