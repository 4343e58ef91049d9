"""Cgroups of sandboxes: a memory cap per sandbox, and a pids cap per isolated process's box.

``RLIMIT_AS`` bounds each process; a run of many processes could still use up to
``max_processes`` times ``memory_mb``. When the host runs as root with a cgroup v1 memory
controller, each sandbox lives in its own memory cgroup capped at ``memory_mb`` plus room for
its tmpfs mounts and its server, and an out-of-memory kill there is reported as
``memory_limit``. Elsewhere ``MemoryCap.create`` returns None and the rlimits alone apply.

An isolated process's box (``_isolated_process.py``) caps its processes with ``RLIMIT_NPROC``,
counted per box (per user namespace). The kernel never applies that limit to root's processes,
and a box that root starts runs as root's user namespace, so as root each box joins a ``PidsCap``:
a group of its own whose ``pids.max`` caps the tasks (processes and threads) in it, in the
hierarchy that has the ``pids`` controller (cgroup v1 ``pids``, or v2 with the controller
enabled there). ``PidsCap.create`` returns None where no such group can be made. A group is
removed once its box has exited: boxes are swept when the next one starts and when this process
exits.

Groups of processes that no longer exist are removed when the next group is made.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import subprocess
import threading
from pathlib import Path

from veriloop.sandbox._limits import MIB, Limits

_SERVER_ROOM = 64 * MIB  # the sandbox server and bubblewrap's own pages
_TMPFS_MOUNTS = 3
_PREFIX = "veriloop-sandbox-"
_counter = itertools.count()
_PIDS_V1_ROOT = Path("/sys/fs/cgroup/pids")
_V2_ROOT = Path("/sys/fs/cgroup")
_boxes_lock = threading.Lock()
_boxes: list[tuple[subprocess.Popen[bytes], Path]] = []


def _own_memory_cgroup() -> Path | None:
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            base = Path("/sys/fs/cgroup/memory") / path.lstrip("/")
            return base if (base / "memory.limit_in_bytes").exists() else None
    return None


def _remove_stale(parent: Path) -> None:
    """Remove empty cgroups left by sandboxes of processes that no longer exist."""
    for entry in parent.glob(_PREFIX + "*"):
        owner = entry.name[len(_PREFIX) :].split("-")[0]
        if owner.isdigit() and not Path(f"/proc/{owner}").exists():
            with contextlib.suppress(OSError):
                entry.rmdir()


def total_bytes(limits: Limits) -> int:
    """The cap for one sandbox running a job with ``limits``."""
    return (limits.memory_mb + _TMPFS_MOUNTS * limits.disk_mb) * MIB + _SERVER_ROOM


class MemoryCap:
    """One cgroup v1 memory group; ``join_file`` is what a process writes its pid to."""

    def __init__(self, path: Path):
        self.path = path
        self.join_file = str(path / "cgroup.procs")
        self._limit = -1
        self._oom_control = os.open(path / "memory.oom_control", os.O_RDONLY | os.O_CLOEXEC)
        self._oom_kills = 0

    @classmethod
    def create(cls, run_as: int | None) -> MemoryCap | None:
        """A new group that ``run_as`` (a uid) may join, or None where cgroups are not ours to use."""
        parent = _own_memory_cgroup()
        if parent is None or os.geteuid() != 0 or not os.access(parent, os.W_OK):
            return None
        _remove_stale(parent)
        path = parent / f"{_PREFIX}{os.getpid()}-{next(_counter)}"
        try:
            path.mkdir()
            if run_as is not None:
                for name in ("cgroup.procs", "tasks"):
                    os.chown(path / name, run_as, run_as)
        except OSError:
            with contextlib.suppress(OSError):
                path.rmdir()
            return None
        cap = cls(path)
        cap._oom_kills = cap.oom_kills()
        return cap

    def fit(self, limits: Limits) -> None:
        """Set the cap for the next job (written only when it changes)."""
        wanted = total_bytes(limits)
        if wanted != self._limit:
            try:
                (self.path / "memory.limit_in_bytes").write_text(str(wanted))
            except OSError:  # usage is above the new cap right now: keep the old one
                return
            self._limit = wanted

    def oom_kills(self) -> int:
        for line in os.pread(self._oom_control, 4096, 0).decode().splitlines():
            name, _, value = line.partition(" ")
            if name == "oom_kill":
                return int(value)
        return 0

    def new_oom_kills(self) -> int:
        """Out-of-memory kills in this group since the last call."""
        now = self.oom_kills()
        new, self._oom_kills = now - self._oom_kills, now
        return new

    def remove(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._oom_control)
        with contextlib.suppress(OSError):
            self.path.rmdir()


def _own_pids_cgroup() -> Path | None:
    """This process's group in the hierarchy that has the pids controller, if we may write there."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    v1 = v2 = None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "pids" in controllers.split(","):
            v1 = _PIDS_V1_ROOT / path.lstrip("/")
        elif controllers == "" and (_V2_ROOT / "cgroup.controllers").exists():
            v2 = _V2_ROOT / path.lstrip("/")
    base = v1 or v2
    return base if base is not None and os.access(base, os.W_OK) else None


class PidsCap:
    """One pids group; a box joins it by writing its pid to ``join_file``."""

    def __init__(self, path: Path):
        self.path = path
        self.join_file = str(path / "cgroup.procs")

    @classmethod
    def create(cls, max_tasks: int) -> PidsCap | None:
        """A new group holding at most ``max_tasks`` tasks, or None where none can be made (not root,
        no pids controller, or its hierarchy is not ours to write)."""
        parent = _own_pids_cgroup()
        if parent is None or os.geteuid() != 0:
            return None
        _remove_stale(parent)
        _sweep_boxes()
        path = parent / f"{_PREFIX}{os.getpid()}-isolated-{next(_counter)}"
        try:
            path.mkdir()
            (path / "pids.max").write_text(str(max_tasks))  # absent where the controller is not enabled
        except OSError:
            with contextlib.suppress(OSError):
                path.rmdir()
            return None
        return cls(path)

    def belongs_to(self, box: subprocess.Popen[bytes]) -> None:
        """Remove the group once ``box`` (the process that joined it) has exited."""
        with _boxes_lock:
            _boxes.append((box, self.path))


@atexit.register
def _sweep_boxes() -> None:
    """Remove the groups of boxes that have exited (a group still emptying is tried next time)."""
    with _boxes_lock:
        for box, path in list(_boxes):
            if box.poll() is None:
                continue
            try:
                path.rmdir()
            except FileNotFoundError:
                pass
            except OSError:
                continue
            _boxes.remove((box, path))
