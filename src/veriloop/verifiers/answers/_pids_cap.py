"""A pids cgroup per scorer box: the cap on its processes where ``RLIMIT_NPROC`` does not bind.

The box's check process sets ``RLIMIT_NPROC`` for itself and all it starts, counted per box
(per user namespace). The kernel never applies that limit to root's processes, and a box that
root starts runs as root's user namespace (its interpreter may live where nobody else can
read), so as root each box joins a cgroup of its own whose ``pids.max`` caps the tasks
(processes and threads) in it: the ``pids`` controller's group of this process (cgroup v1
``pids`` hierarchy, or v2 with the controller enabled there), as ``sandbox/_cgroup.py`` does
for memory. ``PidsCap.create`` returns None where no such group can be made.

A group is removed once its box has exited: boxes are swept when the next one starts and when
this process exits; groups of processes that no longer exist are removed as the sandbox's are.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import subprocess
import threading
from pathlib import Path

from veriloop.sandbox._cgroup import _PREFIX, _remove_stale

_V1_ROOT = Path("/sys/fs/cgroup/pids")
_V2_ROOT = Path("/sys/fs/cgroup")
_counter = itertools.count()
_lock = threading.Lock()
_boxes: list[tuple[subprocess.Popen[bytes], Path]] = []


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
            v1 = _V1_ROOT / path.lstrip("/")
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
        _sweep()
        path = parent / f"{_PREFIX}{os.getpid()}-scorer-{next(_counter)}"
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
        with _lock:
            _boxes.append((box, self.path))


@atexit.register
def _sweep() -> None:
    """Remove the groups of boxes that have exited (a group still emptying is tried next time)."""
    with _lock:
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
