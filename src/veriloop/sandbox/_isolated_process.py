"""A long-lived isolated process: the host's own Python, boxed, for code that must import packages.

A ``Sandbox`` runs jobs on its base interpreter (or a built environment) and forgets each one;
some work needs a process that lives across many requests and imports what the host has
installed, such as a third-party scorer that ``eval``s or sympy-parses model answers.
``start_isolated_process(argv, limits)`` starts ``argv`` (a command line of the host's
interpreter, ``sys.executable``, or of a program the box can see) in a bubblewrap box and hands
back the process, with its stdin and stdout piped to the caller and its stderr discarded (or
piped too, with ``keep_stderr``). The interpreter's own ``bin`` directory comes first on the
box's ``PATH``, so ``python`` there is the host's interpreter with its packages (MCP tool
servers started per episode rely on it: ``veriloop.mcp``). With ``environment=NAME`` the box
runs that built environment instead (``veriloop env build``), and mounts nothing of the host's
interpreter, packages or source: the choice for a process that runs code a model wrote, which
must not read what the host's environment holds (packaged datasets among it).

The box: private namespaces (user, PID, IPC, UTS, mount, network: no network at all); the
system, the interpreter, its virtual environment and the ``veriloop`` package (or the environment
and its base interpreter) mounted read-only; nothing of the host writable but the directories
the caller binds (``binds``), nothing else of it visible but those it binds read-only (``ro_binds``). The one writable place of its own is a private ``/tmp`` of ``limits.disk_mb`` (libraries such as matplotlib need one at import).
The environment is cleared but for a few variables (and those the caller adds, ``env``), the
sandbox's seccomp filter applies, and the process is PID 1 of its namespace, so it may fork a
child per request and kill every process left behind. Nothing else of the host is visible: no
home, no project directory beyond the package source, no task files. When the host runs as root
the box runs as root's user namespace (the interpreter may live under ``/root``); inside it the
process has no capabilities and sees only the read-only mounts.

The process finds in its environment ``VERILOOP_SCRATCH_DIRS`` (``os.pathsep``-separated: its
writable places, ``/tmp``) and ``VERILOOP_SCRATCH_KEEP`` (read-only roots bound inside ``/tmp``,
when a checkout or environment lives there): a process that serves many requests empties the
first between requests, leaving the second in place.

``Limits`` fields, and how the box applies them (before ``argv`` starts, to it and all it starts):

| field          | mechanism                                                               |
|----------------|-------------------------------------------------------------------------|
| memory_mb      | RLIMIT_AS of each process                                               |
| max_processes  | RLIMIT_NPROC, counted per box; as root (where it does not bind) a pids  |
|                | cgroup of the box capped at max_processes + 1 (bubblewrap), and without |
|                | one no box starts (``SandboxUnavailable``)                              |
| max_open_files | RLIMIT_NOFILE of each process                                           |
| max_file_mb    | RLIMIT_FSIZE, at most disk_mb                                           |
| disk_mb        | tmpfs ``--size`` of the private ``/tmp``                                |
| cpu_s          | RLIMIT_CPU of each process for its whole life, only when set (SIGKILL   |
|                | at ``ceil(cpu_s)`` seconds; left unset, as ``timeout_s`` does not bound |
|                | a process that serves many requests)                                    |

A hard limit the host already set lower is kept. ``timeout_s`` and ``output_bytes`` belong to a
run, and the process is not one: it lives until the caller closes its stdin or kills it, so the
caller puts a deadline on each exchange and bounds what it reads of its stdout.
"""

from __future__ import annotations

import functools
import math
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from veriloop.sandbox._backend import SandboxUnavailable
from veriloop.sandbox._bwrap import LOADER_ETC, SANDBOX_UID, bwrap_executable, system_mounts
from veriloop.sandbox._cgroup import PidsCap
from veriloop.sandbox._limits import MIB, Limits
from veriloop.sandbox._seccomp import seccomp_program

# Run by the host's interpreter inside the box, as PID 1: lowers its rlimits (a negative number
# leaves that one as it is), then becomes argv.
_LIMIT_THEN_EXEC = (
    "import os, resource, sys\n"
    "for name, wanted in zip(('NPROC', 'AS', 'NOFILE', 'FSIZE', 'CPU'), map(int, sys.argv[1:6])):\n"
    "    if wanted < 0:\n"
    "        continue\n"
    "    which = getattr(resource, 'RLIMIT_' + name)\n"
    "    hard = resource.getrlimit(which)[1]\n"
    "    value = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)\n"
    "    resource.setrlimit(which, (value, value))\n"
    "os.execvp(sys.argv[6], sys.argv[6:])\n"
)


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


@dataclass(frozen=True)
class BoxPython:
    """The interpreter a box runs and what of the host it mounts for it."""

    executable: str
    roots: tuple[str, ...]  # mounted read-only, at their host paths
    hidden: tuple[str, ...] = ()  # site-packages directories covered by an empty read-only mount


def box_python(environment: str | None = None) -> BoxPython:
    """The host's interpreter with its virtual environment and veriloop's source or, given a built
    ``environment``, that environment on its base interpreter (whose own site-packages are hidden)
    and nothing of the host's packages. A ``UserError`` names an environment that is not built."""
    if environment is None:
        return BoxPython(sys.executable, read_only_roots())
    from veriloop.sandbox._environments import environment_python, load_environment

    python = environment_python(load_environment(environment))
    return BoxPython(python.executable, python.binds, python.hidden)


def kept_in_tmp(roots: Sequence[str] | None = None) -> tuple[str, ...]:
    """Read-only ``roots`` (default: the host's, ``read_only_roots``) that live under ``/tmp`` (a
    checkout, venv or environment store there): bound inside the box's private ``/tmp``, and left
    in place when the process empties it."""
    return tuple(r for r in (read_only_roots() if roots is None else roots) if r.startswith("/tmp/"))


def _mounts(limits: Limits, python: BoxPython, binds: Mapping[str, str], ro_binds: Mapping[str, str]) -> list[str]:
    args = system_mounts()
    # The private /tmp before the roots: a root under /tmp is bound inside it, not hidden by it.
    args += ["--size", str(limits.disk_mb * MIB), "--tmpfs", "/tmp"]
    for root in python.roots:
        args += ["--ro-bind", root, root]
    for host, inside in binds.items():
        args += ["--bind", host, inside]
    for host, inside in ro_binds.items():
        args += ["--ro-bind", host, inside]
    for folder in python.hidden:
        args += ["--tmpfs", folder, "--remount-ro", folder]
    for name in LOADER_ETC:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    return args


def _rlimits(limits: Limits) -> list[str]:
    """RLIMIT_NPROC, _AS, _NOFILE, _FSIZE and _CPU (-1: none), in the order ``_LIMIT_THEN_EXEC`` reads them."""
    file_bytes = min(limits.max_file_mb, limits.disk_mb) * MIB
    cpu_s = -1 if limits.cpu_s is None else math.ceil(limits.cpu_s)
    numbers = (limits.max_processes, limits.memory_mb * MIB, limits.max_open_files, file_bytes, cpu_s)
    return [str(n) for n in numbers]


def isolated_argv(
    argv: Sequence[str],
    limits: Limits,
    seccomp_fd: int | None,
    env: Mapping[str, str] | None = None,
    python: BoxPython | None = None,
    workdir: str = "/tmp",
    binds: Mapping[str, str] | None = None,
    ro_binds: Mapping[str, str] | None = None,
) -> list[str]:
    """The bubblewrap command line that runs ``argv`` in the box (``seccomp_fd``: a pipe holding the
    filter; ``env``: variables set after the box's own, which they may replace; ``python``: what
    it runs on, by default the host's interpreter, ``box_python()``; ``workdir``: its working
    directory, an empty folder made inside the private ``/tmp`` when it is not ``/tmp`` itself,
    whose listing then holds none of the read-only roots bound under ``/tmp``; ``binds`` and
    ``ro_binds``: host directories bound writable and read-only, each at the path given)."""
    python = python or box_python()
    args = [bwrap_executable(), "--unshare-all", "--unshare-user", "--disable-userns"]
    args += ["--die-with-parent", "--as-pid-1", "--new-session", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)]
    args += [
        "--hostname",
        "sandbox",
        *_mounts(limits, python, binds or {}, ro_binds or {}),
        "--proc",
        "/proc",
        "--dev",
        "/dev",
    ]
    args += ["--remount-ro", "/dev", "--remount-ro", "/"]
    if workdir != "/tmp":
        if not workdir.startswith("/tmp/") or ".." in workdir.split("/"):
            raise ValueError(f"workdir {workdir!r}: a folder inside the box's /tmp")
        args += ["--dir", workdir]
    args += ["--chdir", workdir, "--clearenv"]
    # The interpreter's bin directory first: `python` and the environment's scripts are its own.
    path = f"{os.path.dirname(python.executable)}:/usr/bin:/bin"
    box_env = {"PATH": path, "HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
    # One BLAS thread: a process that forks per request needs no more, and a smaller one forks faster.
    box_env |= {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    box_env["VERILOOP_SCRATCH_DIRS"] = "/tmp"
    box_env["VERILOOP_SCRATCH_KEEP"] = os.pathsep.join(kept_in_tmp(python.roots))
    box_env |= dict(env or {})
    for key, value in box_env.items():
        args += ["--setenv", key, value]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    return [*args, python.executable, "-I", "-c", _LIMIT_THEN_EXEC, *_rlimits(limits), *argv]


def _pids_cap(limits: Limits) -> PidsCap | None:
    """The box's pids cgroup when the host runs as root (None otherwise); SandboxUnavailable when
    root has none."""
    if os.geteuid() != 0:
        return None
    cap = PidsCap.create(limits.max_processes + 1)  # and bubblewrap, which stays outside the box's namespace
    if cap is None:
        raise SandboxUnavailable(
            "as root, an isolated process needs a pids cgroup to cap its processes, and none can be made here; "
            "run as an unprivileged user, or give this process a writable cgroup with the pids controller"
        )
    return cap


def start_isolated_process(
    argv: Sequence[str],
    limits: Limits,
    *,
    env: Mapping[str, str] | None = None,
    keep_stderr: bool = False,
    environment: str | None = None,
    workdir: str = "/tmp",
    binds: Mapping[str, str] | None = None,
    ro_binds: Mapping[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """Start ``argv`` (a command of the box's interpreter, or a program on the box's ``PATH``) in
    the box under ``limits`` (see the module's table), with ``env`` added to its environment, piped
    stdin and stdout, and stderr discarded (piped with ``keep_stderr``: the caller then drains it,
    or the process blocks once the pipe is full). The box runs the host's interpreter
    (``sys.executable``) with its packages or, given ``environment``, that built environment alone
    (``box_python``), in ``workdir`` (see ``isolated_argv``). ``binds`` maps host directories to
    the paths where the box sees them, writable (a Unix socket the process listens on there is how
    the host reaches it, the box having no network); ``ro_binds`` likewise, read-only. The box is
    killed when the thread that started it ends (bubblewrap's
    ``--die-with-parent``), or when the returned process (bubblewrap) is killed: start boxes from
    a long-lived thread.

    Raises ``SandboxUnavailable`` when the host runs as root and no pids cgroup can cap the box,
    and ``UserError`` when bubblewrap is missing or too old, or ``environment`` is not built. The
    caller owns the process: it closes stdin (or kills it) and waits for it.
    """
    python = box_python(environment)
    cap = _pids_cap(limits)
    program = seccomp_program()
    read_fd = None
    if program is not None:
        read_fd, write_fd = os.pipe()
        os.write(write_fd, program)  # a few hundred bytes: fits the pipe buffer
        os.close(write_fd)
    command = isolated_argv(argv, limits, read_fd, env, python, workdir, binds, ro_binds)
    if cap is not None:  # join the group first, so every process of the box starts in it
        command = ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', cap.join_file, *command]
    try:
        box = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if keep_stderr else subprocess.DEVNULL,
            close_fds=True,
            pass_fds=() if read_fd is None else (read_fd,),
        )
    finally:
        if read_fd is not None:
            os.close(read_fd)
    if cap is not None:
        cap.belongs_to(box)
    return box
