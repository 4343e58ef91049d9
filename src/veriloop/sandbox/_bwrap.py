"""The bubblewrap command line of one sandbox: what it sees, what it may write, who it runs as.

Every namespace is private (user, PID, IPC, UTS, mount, and network unless asked for), the
system is mounted read-only (``/usr`` and the few ``/etc`` files programs need), and the only
writable places are three small tmpfs mounts: ``/workspace``, ``/tmp`` and ``/dev/shm``. There
is no host ``/tmp``, home, project directory or ``/run``; the environment is cleared. ``/proc`` is
read-only, so no run can write a sysctl of the sandbox's namespaces (they would outlive it) or
lower its OOM score (set to 1000 before bubblewrap starts, and inherited by every process). When the
host runs as root, bubblewrap itself runs as ``nobody`` (so the capabilities it passes on belong to
the sandbox's user namespace only), so even the sandbox's files on the
host side belong to no one with rights, and ``RLIMIT_NPROC`` is counted per sandbox.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from veriloop.core import UserError
from veriloop.sandbox._environment_layout import link_arguments
from veriloop.sandbox._limits import Limits
from veriloop.sandbox._python import SandboxPython, find_python
from veriloop.sandbox._seccomp import seccomp_program
from veriloop.sandbox._shipped import bootstrap, joined_source

SANDBOX_UID = 1000  # the run's uid as the sandbox sees it
NOBODY = 65534
HOST_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
SERVER_MODULES = (
    "_kernel",
    "_frames",
    "_scratch",
    "_workspace_files",
    "_guard",
    "_run",
    "_template",
    "_supervise",
    "_server",
)
"""The modules of ``sandboxed/`` joined into the server's script, in order (``_server`` last: it starts it)."""
SERVER_SOURCE = joined_source(Path(__file__).parent / "sandboxed", SERVER_MODULES)

_MIN_BWRAP = (0, 8, 0)
_ROOT_DIRS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
LOADER_ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime")
_ETC_NETWORK = ("resolv.conf", "hosts", "nsswitch.conf", "host.conf", "gai.conf", "ssl", "ca-certificates")
_PASSWD = f"sandbox:x:{SANDBOX_UID}:{SANDBOX_UID}:sandbox:/workspace:/bin/sh\n"
_GROUP = f"sandbox:x:{SANDBOX_UID}:\n"
# Out of memory, a sandbox's processes go first. Written before bubblewrap starts, since /proc is
# read-only inside; the largest process of a run then goes before its server.
_OOM_FIRST = ("/bin/sh", "-c", 'echo 1000 > /proc/self/oom_score_adj && exec "$@"', "sh")


@dataclass(frozen=True)
class Launch:
    """Everything needed to start one sandbox server process."""

    head: tuple[str, ...]  # bubblewrap arguments before the data passed through pipes
    data: tuple[tuple[str, str, bytes], ...]  # (option, path in the sandbox or "", content)
    tail: tuple[str, ...]  # the remaining arguments and the command
    run_as: int | None  # host uid/gid to drop to before bubblewrap starts, or None

    def argv(self, data_fds: list[int], last: tuple[str, ...] = ()) -> list[str]:
        """The full command line, given one readable pipe per ``data`` entry; ``last`` ends the
        command's arguments (the server's: the descriptor of its pipe of start bytes)."""
        middle = []
        for fd, (option, path, _) in zip(data_fds, self.data, strict=True):
            middle += [option, str(fd), *([path] if path else [])]
        return [*self.head, *middle, *self.tail, *last]


@functools.lru_cache(maxsize=1)
def bwrap_executable() -> str:
    """The bubblewrap binary, if it is new enough (0.8: --disable-userns, --size)."""
    path = shutil.which("bwrap")
    if path is None:
        raise UserError("bubblewrap is not installed (apt-get install -y bubblewrap); the sandbox needs it")
    try:
        words = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10).stdout.split()
        version = tuple(int(part) for part in words[-1].split("."))
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        raise UserError(f"{path} --version did not answer like bubblewrap") from None
    if version < _MIN_BWRAP:
        found = ".".join(map(str, version))
        raise UserError(f"bubblewrap {found} is too old: the sandbox needs {'.'.join(map(str, _MIN_BWRAP))} or newer")
    return path


def system_mounts() -> list[str]:
    """/usr and the root directories that point into it, read-only (symlinks kept as symlinks)."""
    args = ["--ro-bind", "/usr", "/usr"]
    for name in _ROOT_DIRS:
        path = f"/{name}"
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return args


def _python_mounts(python: SandboxPython) -> list[str]:
    args = []
    for path in python.binds:
        args += ["--ro-bind", path, path]
    for path in python.hidden:
        args += ["--tmpfs", path, "--remount-ro", path]
    return args + link_arguments(dict(python.links))


def launch_for(
    python: SandboxPython,
    limits: Limits,
    network: bool,
    *,
    workspace: str | None = None,
    command: tuple[str, ...] | None = None,
    preload: tuple[tuple[str, str], ...] = (),
) -> Launch:
    """The bubblewrap invocation of a sandbox server with ``limits.disk_mb``-sized mounts.

    ``workspace`` (a host directory bound as ``/workspace`` instead of a tmpfs) and ``command``
    (run instead of the server) make the sandbox a person can look around in (``open_shell``).
    ``preload`` (module name, source) pairs are placed read-only under ``/preload/`` and defined
    by the server before its first run (``sandboxed/_server.py``'s ``preload``).
    """
    size = str(limits.disk_mb << 20)
    etc = LOADER_ETC + (_ETC_NETWORK if network else ())
    args = [*_OOM_FIRST, bwrap_executable(), "--unshare-all", "--unshare-user", "--disable-userns"]
    # Without network access the template (sandboxed/_template.py) makes a fresh network namespace
    # after a run that left sockets behind: it keeps these two capabilities of the sandbox's own
    # user namespace, which the server and every run drop before anything else.
    args += ["--share-net"] if network else ["--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_NET_ADMIN"]
    args += ["--die-with-parent", "--as-pid-1", "--new-session", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)]
    args += ["--hostname", "sandbox", *system_mounts()]
    for name in etc:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    head, args = args, ["--proc", "/proc", "--remount-ro", "/proc", "--dev", "/dev"]
    for mount in ("/workspace", "/tmp", "/dev/shm"):
        if mount == "/workspace" and workspace is not None:
            args += ["--bind", workspace, mount]
        else:
            args += ["--size", size, "--tmpfs", mount]
    args += _python_mounts(python)  # after the tmpfs mounts: an interpreter or environment under /tmp stays visible
    args += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", "/workspace", "--clearenv"]
    path_dirs = [f"{d}/bin" for d in python.binds] + ["/usr/local/bin", "/usr/bin", "/bin"]
    env = {
        "PATH": ":".join(path_dirs),
        "HOME": "/workspace",
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "USER": "sandbox",
        "PYTHONDONTWRITEBYTECODE": "1",
        # Runs are cloned from a warm process without the C library's fork handlers, so a BLAS
        # a warm module loaded must not keep a thread pool (it would not survive the clone).
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        **dict(python.variables),  # the environment's own (checked when it was built: none of the above)
    }
    for key, value in env.items():
        args += ["--setenv", key, value]
    data = [("--ro-bind-data", "/etc/passwd", _PASSWD.encode()), ("--ro-bind-data", "/etc/group", _GROUP.encode())]
    program = seccomp_program()
    if program is not None:
        data.append(("--seccomp", "", program))
    preloaded = []
    for name, source in preload:
        if not name.isidentifier():
            raise UserError(f"a preloaded module needs a Python module name, got {name!r}")
        data.append(("--ro-bind-data", f"/preload/{name}.py", source.encode()))
        preloaded.append(f"/preload/{name}.py")
    server = (python.executable, "-I", "-c", bootstrap(SERVER_SOURCE, "<sandbox server>"), *python.warm, *preloaded)
    command = command or server
    return Launch(
        head=tuple(head), data=tuple(data), tail=(*args, *command), run_as=NOBODY if os.geteuid() == 0 else None
    )


def open_shell(files: dict[str, bytes], environment: str | None = None, network: bool = False) -> int:
    """An interactive shell (``/bin/sh -i``) on this terminal in a sandbox whose ``/workspace``
    holds ``files`` (a private copy, removed afterwards), on the built environment named
    ``environment`` or, without one, on the sandbox's base interpreter; the shell's exit status.

    The sandbox is the one runs get (``launch_for`` with default ``Limits``), with no network
    unless ``network``. A UserError when ``environment`` is not built or bubblewrap is missing.
    """
    import tempfile

    from veriloop.sandbox._environments import environment_python, load_environment

    python = environment_python(load_environment(environment)) if environment else find_python()
    with tempfile.TemporaryDirectory(prefix="veriloop-shell-") as folder:
        for name, content in files.items():
            path = Path(folder, name)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
        launch = launch_for(python, Limits(), network, workspace=folder, command=("/bin/sh", "-i"))
        if launch.run_as is not None:  # the sandbox user is nobody on the host: let it write its copy
            for root, dirs, names in os.walk(folder):
                for name in [*dirs, *names, "."]:
                    os.chown(os.path.join(root, name), launch.run_as, launch.run_as)
        fds = []
        try:
            for _, _, content in launch.data:
                read_end, write_end = os.pipe()
                os.write(write_end, content)
                os.close(write_end)
                fds.append(read_end)
            drop = {} if launch.run_as is None else {"user": launch.run_as, "group": launch.run_as, "extra_groups": []}
            argv = [arg for arg in launch.argv(fds) if arg != "--new-session"]  # keep the terminal
            return subprocess.run(argv, env=HOST_ENV, cwd="/", pass_fds=fds, **drop).returncode
        finally:
            for fd in fds:
                os.close(fd)
