"""A memory cgroup per sandbox: a cap on a run's total memory, on top of per-process rlimits.

``RLIMIT_AS`` bounds each process; a run of many processes could still use up to
``max_processes`` times ``memory_mb``. When the host runs as root with a cgroup v1 memory
controller, each sandbox lives in its own memory cgroup capped at ``memory_mb`` plus room for
its tmpfs mounts and its server, and an out-of-memory kill there is reported as
``memory_limit``. Elsewhere ``MemoryCap.create`` returns None and the rlimits alone apply.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from pathlib import Path

from veriloop.sandbox._limits import MIB, Limits

_SERVER_ROOM = 64 * MIB  # the sandbox server and bubblewrap's own pages
_TMPFS_MOUNTS = 3
_PREFIX = "veriloop-sandbox-"
_counter = itertools.count()


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
