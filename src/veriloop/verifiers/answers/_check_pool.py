"""The check pool: killable processes that put a hard wall-clock limit on checks that may never finish.

Parsing and comparing untrusted answers (sympy simplification, a generator's own scorer) can
run for minutes or forever on a hostile input. Signal-based timeouts work only in the main
thread, and a thread cannot be stopped, so such checks run in long-lived check processes (the
"check workers" of ``set_check_workers``) that are killed when a call passes its deadline. The
wait uses ``select`` on a pipe, which works from any thread and any process.

Each process runs ``python -m veriloop.verifiers.answers._check_process MODULE:FUNCTION``: it
imports only that module (never the caller's ``__main__``), reads one JSON request per line on
stdin and writes one JSON reply per line. Requests and replies are plain JSON data.

An ``isolated`` pool is for checks that run third-party code on model text (scorers that
``eval`` or sympy-parse answers): each worker is a sandbox's isolated process
(``veriloop.sandbox.start_isolated_process``: no network, nothing of the host writable, under
``scorer_limits``) and a template that forks a fresh child per check, so nothing one check does
reaches the host or the next check.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from veriloop.verifiers._registry import GraderError

if TYPE_CHECKING:
    from veriloop.sandbox import Limits

DEFAULT_MEMORY_MB = 4096
SCORER_MAX_PROCESSES = 64
"""Processes and threads one isolated worker's box may hold at once; a scorer needs one or two."""
# A fresh worker imports its module before it answers; that time is not part of any check.
STARTUP_TIMEOUT_S = 120.0


class CheckTimeout(GraderError):
    """A check ran past its wall-clock limit; its worker was killed and replaced."""


class CheckProcessCrashed(GraderError):
    """A check process exited or broke its protocol while handling a call."""


class ScorerBoxUnavailable(GraderError):
    """No isolated worker can be started whose processes are capped (root without a pids cgroup)."""


def scorer_limits(memory_mb: int | None) -> Limits:
    """What one isolated worker's box may use: ``memory_mb`` of address space per process (None:
    the most ``Limits`` allows), ``SCORER_MAX_PROCESSES`` processes and threads, a 64 MiB ``/tmp``."""
    from veriloop.sandbox import Limits

    return Limits(
        memory_mb=memory_mb or 1 << 20,  # None: the most Limits allows, 1 TiB, which no process reaches
        max_processes=SCORER_MAX_PROCESSES,
        disk_mb=64,
        max_file_mb=64,
        max_open_files=1024,
    )


class _CheckProcess:
    """One check process and the buffered read side of its reply pipe."""

    def __init__(self, process: subprocess.Popen[bytes]):
        self.process = process
        self.ready = False
        self._buffer = b""

    def wait_ready(self) -> None:
        """Wait for the worker's first line, written once its module is imported."""
        if self.ready:
            return
        hello = self.receive(time.monotonic() + STARTUP_TIMEOUT_S)
        if not isinstance(hello, dict) or not hello.get("ready"):
            error = hello.get("error") if isinstance(hello, dict) else None
            raise CheckProcessCrashed(error or f"worker did not start within {STARTUP_TIMEOUT_S:g} s")
        self.ready = True

    def send(self, request: Any) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(request).encode() + b"\n")
        self.process.stdin.flush()

    def receive(self, deadline: float) -> Any | None:
        """The next reply, or None when ``deadline`` (a ``time.monotonic`` value) passes first."""
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise CheckProcessCrashed(f"worker exited (status {self.process.poll()}) during a check")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return json.loads(line)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        self.process.wait()


class CheckPool:
    """Up to ``size`` check processes running ``target`` ("module:function"), shared by threads.

    ``call`` blocks until a worker is free, sends the request and waits at most ``timeout_s``
    for the reply. Workers start on first use and are reused; a worker that times out or
    crashes is killed and a fresh one is started in its place.
    """

    def __init__(self, target: str, size: int, memory_mb: int | None = DEFAULT_MEMORY_MB, isolated: bool = False):
        if size < 1:
            raise ValueError("a worker pool needs at least one worker")
        self.target = target
        self.isolated = isolated
        self.size = size
        self.memory_mb = memory_mb
        self._idle: list[_CheckProcess] = []
        self._started = 0
        self._lock = threading.Condition()
        self._closed = False
        # Workers are started from one long-lived thread: each worker asks the kernel to kill it
        # when the thread that started it exits, so no stuck worker outlives its parent.
        self._spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="veriloop-workers")

    def _start(self) -> _CheckProcess:
        return _CheckProcess(self._spawner.submit(self._popen).result())

    def _popen(self) -> subprocess.Popen[bytes]:
        module = [sys.executable, "-m", "veriloop.verifiers.answers._check_process", self.target]
        if self.isolated:
            from veriloop.sandbox import SandboxUnavailable, start_isolated_process

            # Inside the box the parent is outside the PID namespace: the box itself dies with it.
            # The box applies the memory limit, so the process is given none of its own.
            try:
                return start_isolated_process(
                    [sys.executable, "-I", *module[1:], "0", "0", "fork"], scorer_limits(self.memory_mb)
                )
            except SandboxUnavailable as exc:
                raise ScorerBoxUnavailable(str(exc)) from None
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        return subprocess.Popen(
            [*module, str(self.memory_mb or 0), str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            close_fds=True,
        )

    def _acquire(self) -> _CheckProcess:
        with self._lock:
            while True:
                if self._closed:
                    raise GraderError("the worker pool is closed")
                if self._idle:
                    return self._idle.pop()
                if self._started < self.size:
                    self._started += 1
                    break
                self._lock.wait()
        try:
            return self._start()
        except BaseException:
            self._discard(None)
            raise

    def _release(self, worker: _CheckProcess) -> None:
        with self._lock:
            if self._closed:
                worker.kill()
                return
            self._idle.append(worker)
            self._lock.notify()

    def _discard(self, worker: _CheckProcess | None, replace: bool = False) -> None:
        """Kill ``worker``; with ``replace``, start its successor now so its import overlaps other work."""
        if worker is not None:
            worker.kill()
        if replace and not self._closed:
            try:
                self._release(self._start())
                return
            except (OSError, RuntimeError):  # RuntimeError: the pool was closed meanwhile
                pass
        with self._lock:
            self._started -= 1
            self._lock.notify()

    def call(self, request: Any, timeout_s: float) -> Any:
        """Run ``target(request)`` in a worker; its return value, or CheckTimeout/GraderError.

        An exception inside ``target`` comes back as a GraderError carrying its message.
        """
        worker = self._acquire()
        try:
            worker.wait_ready()
            worker.send(request)
            reply = worker.receive(time.monotonic() + timeout_s)
        except (OSError, ValueError, CheckProcessCrashed) as exc:
            self._discard(worker, replace=True)
            if isinstance(exc, CheckProcessCrashed):
                raise
            raise CheckProcessCrashed(f"lost contact with a worker: {exc}") from None
        except BaseException:
            self._discard(worker)
            raise
        if reply is None:
            self._discard(worker, replace=True)
            raise CheckTimeout(f"check took longer than {timeout_s:g} s; it was stopped")
        self._release(worker)
        if not reply.get("ok"):
            raise GraderError(reply.get("error", "worker failed"))
        return reply["value"]

    def warm(self) -> None:
        """Start every worker now and wait until each is ready (optional; calls start them too)."""
        workers: list[_CheckProcess] = []
        while len(workers) < self.size:
            with self._lock:
                if self._closed:
                    break
                if self._idle:
                    workers.append(self._idle.pop())
                    continue
                if self._started >= self.size:
                    break
                self._started += 1
            try:
                workers.append(self._start())
            except BaseException:
                self._discard(None)
                workers, failed = [], workers
                for worker in failed:
                    self._release(worker)
                raise
        failure: CheckProcessCrashed | None = None
        for worker in workers:
            try:
                worker.wait_ready()
            except CheckProcessCrashed as exc:
                self._discard(worker)
                failure = exc
                continue
            self._release(worker)
        if failure is not None:
            raise failure

    def worker_pids(self) -> list[int]:
        """Process ids of the idle workers (for monitoring and CPU accounting)."""
        with self._lock:
            return [worker.process.pid for worker in self._idle]

    def close(self) -> None:
        """Kill every idle worker; busy ones are killed when their call returns."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            self._lock.notify_all()
        for worker in idle:
            worker.kill()
        self._spawner.shutdown(wait=False)


_POOLS: dict[tuple[str, bool], CheckPool] = {}
_POOLS_LOCK = threading.Lock()
_POOLS_PID = os.getpid()
_POOL_SIZE: int | None = None


def default_pool_size() -> int:
    """Workers per pool: ``set_check_workers``, else ``VERILOOP_CHECK_WORKERS``, else the CPU count (at most 8)."""
    if _POOL_SIZE is not None:
        return _POOL_SIZE
    configured = os.environ.get("VERILOOP_CHECK_WORKERS", "")
    if configured.isdigit() and int(configured) > 0:
        return int(configured)
    return max(1, min(8, os.cpu_count() or 1))


def set_check_workers(size: int | None) -> None:
    """Worker processes per check pool (math, reasoning-gym) from now on; None restores the default.

    Running pools are closed; their replacements start on next use with the new size.
    """
    global _POOL_SIZE
    if size is not None and size < 1:
        raise ValueError("check workers must be at least 1")
    _POOL_SIZE = size
    close_shared_pools()


def shared_pool(target: str, isolated: bool = False) -> CheckPool:
    """The process-wide pool for ``target`` (``isolated``: see ``CheckPool``), created on first use
    (a fresh one after a fork)."""
    global _POOLS_PID
    with _POOLS_LOCK:
        if _POOLS_PID != os.getpid():  # a forked child must not share its parent's pipes
            _POOLS.clear()
            _POOLS_PID = os.getpid()
        pool = _POOLS.get((target, isolated))
        if pool is None:
            pool = _POOLS[(target, isolated)] = CheckPool(target, default_pool_size(), isolated=isolated)
        return pool


def close_shared_pools() -> None:
    """Stop every shared pool's workers (they restart on next use)."""
    with _POOLS_LOCK:
        pools = list(_POOLS.values()) if _POOLS_PID == os.getpid() else []
        _POOLS.clear()
    for pool in pools:
        pool.close()
