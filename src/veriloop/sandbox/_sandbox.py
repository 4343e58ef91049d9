"""``Sandbox``: the one entry point for running model-written code, sync or asyncio."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, TypedDict, Unpack

from veriloop.core import ExecResult, Snapshot, UserError
from veriloop.sandbox._backend import BACKENDS, Backend, BackendSettings
from veriloop.sandbox._job import Job, make_job
from veriloop.sandbox._limits import Limits

Files = Mapping[str, str | bytes]


class RunOptions(TypedDict, total=False):
    """Keyword options of ``run`` and ``run_python``.

    ``files`` are placed in the fresh workspace (text is written as UTF-8), after unpacking
    ``snapshot`` if one is given; ``stdin`` feeds the program; ``limits`` replace the
    sandbox's for this run; ``capture=True`` returns the workspace in ``result.snapshot``.
    """

    files: Files | None
    stdin: str | bytes | None
    limits: Limits | None
    snapshot: Snapshot | None
    capture: bool


class Sandbox:
    """Isolated, limited execution on a pool of ``workers`` sandboxes.

    ``backend`` is a name in ``BACKENDS`` ("bwrap": local bubblewrap sandboxes with warm Python
    interpreters; "remote": a ``veriloop sandbox serve`` service at ``url``). ``limits`` apply
    to every run unless a call passes its own. ``network=True`` gives runs the host's network
    (bwrap only; off by default). ``python`` picks the interpreter used inside (bwrap only).
    ``environment`` names a built environment (``veriloop env build``) whose packages runs can
    import (bwrap only); every result then carries its hash. ``preload`` maps module names to
    source (standard library only, trusted: the host's own) that each sandbox defines once, before
    its first run, so that every run finds those modules already imported (bwrap only; the
    names are in ``preloaded``). Nothing a run does to them reaches another run.

    Every run returns an ExecResult; a run that hit a limit is a status, never an exception.
    Bad arguments raise UserError; a sandbox that cannot start, or a service that cannot be
    reached, raises SandboxUnavailable. Use it as a context manager, or call ``close()``.
    """

    def __init__(
        self,
        limits: Limits | None = None,
        workers: int = 1,
        backend: str = "bwrap",
        *,
        network: bool = False,
        python: str | None = None,
        url: str | None = None,
        token: str | None = None,
        environment: str | None = None,
        preload: Mapping[str, str] | None = None,
    ):
        if not isinstance(workers, int) or not 1 <= workers <= 256:
            raise UserError(f"workers must be a whole number from 1 to 256, got {workers!r}")
        self.limits = limits or Limits()
        self.workers = workers
        settings = BackendSettings(
            limits=self.limits,
            workers=workers,
            network=network,
            python=python,
            url=url,
            token=token,
            environment=environment,
            preload=tuple((preload or {}).items()),
        )
        self.preloaded = frozenset(preload or ())
        self._backend: Backend = BACKENDS.get(backend)(settings)
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sandbox")
        self._finalizer = weakref.finalize(self, _shutdown, self._backend, self._executor)

    # ---- one run ------------------------------------------------------------------------

    def execute(self, job: Job) -> ExecResult:
        """Run a prepared Job (the form the service and the remote backend exchange)."""
        if not self._finalizer.alive:
            raise UserError("this Sandbox is closed")
        return self._backend.execute(job)

    def run(self, cmd: Sequence[str] | str, **options: Unpack[RunOptions]) -> ExecResult:
        """Run a command (argv list; a string runs with ``/bin/sh -c``) in a fresh workspace."""
        argv = ["/bin/sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        return self.execute(self._job("exec", argv=argv, **options))

    def run_python(self, code: str, **options: Unpack[RunOptions]) -> ExecResult:
        """Run Python source like ``python3 -c`` would, on a warm interpreter forked for this run."""
        if not isinstance(code, str):
            raise UserError(f"code must be a str, got {type(code).__name__}")
        return self.execute(self._job("python", code=code, **options))

    def _job(self, kind: Literal["python", "exec"], *, limits: Limits | None = None, **fields: Any) -> Job:
        return make_job(kind, limits=limits or self.limits, **fields)

    # ---- many runs ----------------------------------------------------------------------

    def map_python(self, codes: Iterable[str], *, limits: Limits | None = None) -> list[ExecResult]:
        """Run every snippet, all workers busy; results in the order of ``codes``."""
        jobs = [self._job("python", code=code, limits=limits) for code in codes]
        return list(self._executor.map(self.execute, jobs))

    async def arun(self, cmd: Sequence[str] | str, **kwargs: Any) -> ExecResult:
        """``run`` for asyncio: waits without blocking the event loop."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, lambda: self.run(cmd, **kwargs))

    async def arun_python(self, code: str, **kwargs: Any) -> ExecResult:
        """``run_python`` for asyncio: waits without blocking the event loop."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, lambda: self.run_python(code, **kwargs))

    # ---- lifetime -----------------------------------------------------------------------

    def close(self) -> None:
        """Stop every sandbox; every process they ran is gone when this returns."""
        self._finalizer()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _shutdown(backend: Backend, executor: ThreadPoolExecutor) -> None:
    executor.shutdown(wait=False, cancel_futures=True)
    backend.close()
