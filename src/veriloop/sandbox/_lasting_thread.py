"""Starting sandbox processes from one thread that lasts as long as the host process.

Bubblewrap's ``--die-with-parent`` (the kernel's ``PR_SET_PDEATHSIG``) kills a sandbox when the
*thread* that started it ends, not only when the host process does. A sandbox started from a
short-lived thread (one that starts the sandbox early while the task files load, a worker of a
pool that is later shut down) was killed with that thread, silently, and replaced at its next
job at the cost of a fresh start (bubblewrap, an interpreter, the warm imports). Every sandbox
server is therefore started here: from one daemon thread, made on first use, that ends only
with the process, so a sandbox still dies with its host and never before.

It is a daemon thread, never joined at exit: the host's exit hooks end each idle server
gracefully (``ServerHandle.shutdown``) before the thread, and with it any server left, goes.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_requests: queue.SimpleQueue[tuple[Callable[[], object], Future]] = queue.SimpleQueue()
_thread: threading.Thread | None = None


def _serve() -> None:
    while True:
        start, done = _requests.get()
        try:
            done.set_result(start())
        except BaseException as exc:  # handed to the caller, who raises it in its own thread
            done.set_exception(exc)


def _lasting() -> threading.Thread:
    global _thread
    with _lock:
        if _thread is None:
            _thread = threading.Thread(target=_serve, name="sandbox-starter", daemon=True)
            _thread.start()
        return _thread


def _forget_after_fork() -> None:
    """A forked child has none of its parent's threads: it makes its own lasting thread."""
    global _lock, _requests, _thread
    _lock, _requests, _thread = threading.Lock(), queue.SimpleQueue(), None


os.register_at_fork(after_in_child=_forget_after_fork)


def in_lasting_thread(start: Callable[[], T]) -> T:
    """``start()`` run on the lasting thread (at once when called from it); its result, or its
    exception raised here."""
    if threading.current_thread() is _lasting():
        return start()
    done: Future = Future()
    _requests.put((start, done))
    return done.result()
