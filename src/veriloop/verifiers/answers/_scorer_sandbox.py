"""A bubblewrap box for check processes that run third-party scorers on model answers.

Some scorers ``eval`` or sympy-parse the answer, so a check process must be treated like a
sandbox: ``start_isolated_check_process(argv)`` starts ``argv`` (a Python command line) in
private namespaces (user, PID, IPC, UTS, mount, network: no network at all), with the
system, the interpreter, the virtual environment and the ``veriloop`` package mounted
read-only and nothing of the host writable: the one writable place is a small private
``/tmp`` (libraries such as matplotlib need one at import), which the template empties after
every check (``VERILOOP_SCRATCH_DIRS``), so no file reaches the next check; the
environment cleared and the sandbox's seccomp filter applied. Nothing else of the host is
visible: no home, no project directory beyond the package source, no task files.

The process is PID 1 of its namespace, so together with ``_check_process``'s fork mode each
check runs in a fresh child that is killed with all it started before the next one. When
the host runs as root, the box runs as root's user namespace (the interpreter may live under
``/root``); inside it the process has no capabilities and sees only the read-only mounts.

A box holds at most ``MAX_PROCESSES`` processes and threads (its template, the check's child
and all they start), so an answer that forks without end fails its own forks instead of
filling the host's process table: the check process sets ``RLIMIT_NPROC`` inside the box
(``VERILOOP_MAX_PROCESSES``), which the kernel counts per box; as root, where that limit does
not bind, the box runs in a pids cgroup of its own (``_pids_cap.py``), and without one no box
is started (``ScorerBoxUnavailable``), since nothing else would cap it.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

from veriloop.sandbox._bwrap import LOADER_ETC, bwrap_executable, system_mounts
from veriloop.sandbox._seccomp import seccomp_program
from veriloop.verifiers._registry import GraderError
from veriloop.verifiers.answers._pids_cap import PidsCap

TMP_MB = 64
MAX_PROCESSES = 64
"""Processes and threads one box may hold at once; a scorer needs one or two."""


class ScorerBoxUnavailable(GraderError):
    """No box can be started whose processes are capped (root without a pids cgroup)."""


@functools.lru_cache(maxsize=1)
def read_only_roots() -> tuple[str, ...]:
    """Host directories the box mounts read-only: the interpreter, the environment, veriloop's source."""
    import veriloop

    package_parent = Path(veriloop.__file__).resolve().parents[1]
    roots = {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix, str(package_parent)}
    roots |= {os.path.realpath(r) for r in list(roots)}
    under_usr = {r for r in roots if r == "/usr" or r.startswith("/usr/")}
    kept = sorted(r for r in roots - under_usr if os.path.isdir(r))
    # A root inside another is covered by the outer mount.
    return tuple(r for r in kept if not any(r != o and r.startswith(o + "/") for o in kept))


def kept_in_tmp() -> tuple[str, ...]:
    """Read-only roots that live under ``/tmp`` (a checkout or venv there): bound inside the box's
    private ``/tmp``, and left in place when the template empties it."""
    return tuple(r for r in read_only_roots() if r.startswith("/tmp/"))


def _mounts() -> list[str]:
    args = system_mounts()
    # The private /tmp before the roots: a root under /tmp is bound inside it, not hidden by it.
    args += ["--size", str(TMP_MB << 20), "--tmpfs", "/tmp"]
    for root in read_only_roots():
        args += ["--ro-bind", root, root]
    for name in LOADER_ETC:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    return args


def isolated_argv(argv: list[str], seccomp_fd: int | None) -> list[str]:
    """The bubblewrap command line that runs ``argv`` in the box (``seccomp_fd``: a pipe holding the filter)."""
    args = [bwrap_executable(), "--unshare-all", "--unshare-user", "--disable-userns"]
    args += ["--die-with-parent", "--as-pid-1", "--new-session", "--uid", "1000", "--gid", "1000"]
    args += ["--hostname", "scorer", *_mounts(), "--proc", "/proc", "--dev", "/dev"]
    args += ["--remount-ro", "/dev", "--remount-ro", "/"]
    args += ["--chdir", "/tmp", "--clearenv"]
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
    # One BLAS thread: a scorer needs no more, and a smaller template forks faster.
    env |= {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    env["VERILOOP_SCRATCH_DIRS"] = "/tmp"
    env["VERILOOP_SCRATCH_KEEP"] = os.pathsep.join(kept_in_tmp())
    env["VERILOOP_MAX_PROCESSES"] = str(MAX_PROCESSES)
    for key, value in env.items():
        args += ["--setenv", key, value]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    return [*args, *argv]


def _pids_cap() -> PidsCap | None:
    """The box's pids cgroup when the host runs as root (None otherwise); raises
    ScorerBoxUnavailable when root has none."""
    if os.geteuid() != 0:
        return None
    cap = PidsCap.create(MAX_PROCESSES + 1)  # and bubblewrap, which stays outside the box's namespace
    if cap is None:
        raise ScorerBoxUnavailable(
            "as root, a scorer box needs a pids cgroup to cap its processes, and none can be made here; "
            "run as an unprivileged user, or give this process a writable cgroup with the pids controller"
        )
    return cap


def start_isolated_check_process(argv: list[str]) -> subprocess.Popen[bytes]:
    """Start ``argv`` in the box with piped stdin and stdout (stderr discarded)."""
    cap = _pids_cap()
    program = seccomp_program()
    read_fd = None
    if program is not None:
        read_fd, write_fd = os.pipe()
        os.write(write_fd, program)  # a few hundred bytes: fits the pipe buffer
        os.close(write_fd)
    command = isolated_argv(argv, read_fd)
    if cap is not None:  # join the group first, so every process of the box starts in it
        command = ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', cap.join_file, *command]
    try:
        box = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            pass_fds=() if read_fd is None else (read_fd,),
        )
    finally:
        if read_fd is not None:
            os.close(read_fd)
    if cap is not None:
        cap.belongs_to(box)
    return box
