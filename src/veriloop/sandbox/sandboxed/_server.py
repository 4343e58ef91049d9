"""The sandbox server: a warm interpreter inside bubblewrap that forks one child per run.

The host (``_server_handle.py``) starts it as ``python3 -I -c <this source>``. It never imports
veriloop (standard library only, Python >= 3.9). It reads length-prefixed JSON jobs on stdin and
answers on stdout. Each job carries ``enforced``: the limits of the run as exact numbers, computed
by the host (``_limits.enforced_limits``); the server applies them and derives none of its own.
For each job it

1. forks a child, which unpacks the workspace, applies the rlimits and then runs the Python
   source in a fresh ``__main__`` (the fast path: a fork, not an interpreter start) or execs
   the command;
2. feeds stdin, keeps at most the cap of stdout and stderr, and enforces the wall deadline;
3. SIGKILLs every other process of the PID namespace with ``kill(-1)`` and reaps them all
   (they are all the run's, and as the namespace's init this server inherits every orphan);
4. empties every writable mount (and removes SysV IPC objects where the seccomp filter does not
   deny them), so nothing of the run survives into the next one;
5. answers with the outcome, or asks the host for a fresh sandbox if it could not clean up.

The server is the PID namespace's init, so the run's processes cannot signal it (the kernel
drops their signals to an init without handlers), and it is not dumpable, so they can neither
ptrace it nor open its /proc files.
"""

import atexit
import base64
import builtins
import ctypes
import errno
import gc
import io
import json
import math
import os
import resource
import select
import shutil
import signal
import struct
import sys
import tarfile
import time
import types

WORKSPACE = "/workspace"
REPORT_FD = 3  # in the child: where it reports a failed setup or exec (close-on-exec)
SCRATCH_MODES = {"/workspace": 0o755, "/tmp": 0o1777, "/dev/shm": 0o1777}
MIB = 1 << 20
PR_SET_DUMPABLE = 4
IPC_RMID = 0
IPC_DENIED = False  # set at start: True when the seccomp filter denies creating SysV IPC objects
MEMORY_WORDS = (b"MemoryError", b"std::bad_alloc", b"Cannot allocate memory", b"out of memory")
WARM_MODULES = (
    "abc",
    "array",
    "atexit",
    "bisect",
    "collections",
    "contextlib",
    "copy",
    "dataclasses",
    "datetime",
    "decimal",
    "enum",
    "fractions",
    "functools",
    "heapq",
    "itertools",
    "json",
    "math",
    "operator",
    "random",
    "re",
    "statistics",
    "string",
    "textwrap",
    "threading",
    "traceback",
    "types",
    "typing",
    "unittest",
)

libc = ctypes.CDLL(None, use_errno=True)
# fork(2) without CPython's at-fork bookkeeping, which copies ~200 pages per child. Safe here:
# this server has one thread and forks outside any import. Of the hooks the warm modules
# registered, random's reseed is done by the server before each fork (where it copies no
# pages); threading's only refreshes main_thread().native_id.
raw_fork = ctypes.PyDLL(None, use_errno=True).fork


def read_exact(fd, size):
    chunks = []
    while size:
        chunk = os.read(fd, min(size, MIB))
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def read_message(fd):
    header = read_exact(fd, 4)
    body = None if header is None else read_exact(fd, struct.unpack(">I", header)[0])
    return None if body is None else json.loads(body)


def write_message(fd, message):
    data = json.dumps(message).encode()
    view = memoryview(struct.pack(">I", len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


def unb64(text):
    return base64.urlsafe_b64decode(text) if text else b""


def b64(data):
    return base64.b64encode(bytes(data)).decode()


def report_failure(fd, kind, text):
    try:
        os.write(fd, (kind + text)[:2000].encode("utf-8", "replace"))
    except OSError:
        pass


# ---- the child: prepare, limit, run -------------------------------------------------------


def child_main(job, plan, stdin_r, stdout_w, stderr_w, report_w):
    """The run's process. ``plan`` was prepared before the fork: work done there copies no pages."""
    try:
        os.setsid()
        os.dup2(stdin_r, 0)
        os.dup2(stdout_w, 1)
        os.dup2(stderr_w, 2)
        os.dup2(report_w, REPORT_FD, inheritable=False)
        os.closerange(4, 1 << 20)
        libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
        os.chdir(WORKSPACE)
        if plan.files or plan.archive:
            prepare_workspace(plan)
        for which, pair in plan.rlimits:
            resource.setrlimit(which, pair)
    except BaseException as exc:
        report_failure(REPORT_FD, "S", "%s: %s" % (type(exc).__name__, exc))
        os._exit(126)
    if job["kind"] == "exec":
        exec_command(job["argv"])
    exec_python(job["code"])


class RunPlan:
    """What the child needs, decoded by the server before forking."""

    def __init__(self, job):
        snapshot = job.get("snapshot")
        self.archive = unb64(snapshot["archive"]) if snapshot else b""
        self.files = [(name, unb64(content)) for name, content in job["files"].items()]
        self.rlimits = rlimit_plan(job["enforced"])
        self.stdin = unb64(job["stdin"])


def prepare_workspace(plan):
    if plan.archive:
        unpack(plan.archive)
    for name, content in plan.files:
        parent = os.path.dirname(name)
        if parent:
            os.makedirs(parent, exist_ok=True)
        with open(name, "wb") as handle:
            handle.write(content)


def unpack(archive):
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:") as tar:
        for member in tar:
            name = os.path.normpath(member.name)
            if name.startswith("/") or ".." in name.split("/") or name == ".":
                continue
            if member.isdir():
                os.makedirs(name, exist_ok=True)
            elif member.isfile():
                parent = os.path.dirname(name)
                if parent:
                    os.makedirs(parent, exist_ok=True)
                with open(name, "wb") as handle:
                    shutil.copyfileobj(tar.extractfile(member), handle)
                os.chmod(name, member.mode & 0o777)


def rlimit_plan(enforced):
    """``[(resource, (soft, hard)), ...]`` for a run, never above this server's hard limits."""
    memory = enforced["address_space_bytes"]
    wanted = (
        (resource.RLIMIT_AS, memory, memory),
        (resource.RLIMIT_CPU, enforced["cpu_soft_s"], enforced["cpu_hard_s"]),  # SIGXCPU first, then SIGKILL
        (resource.RLIMIT_NPROC, enforced["tasks"], None),
        (resource.RLIMIT_NOFILE, enforced["open_files"], None),
        (resource.RLIMIT_FSIZE, enforced["file_bytes"], None),
        (resource.RLIMIT_CORE, 0, None),
        (resource.RLIMIT_MSGQUEUE, 0, None),  # POSIX message queues would outlive the run
    )
    plan = []
    for which, soft, hard in wanted:
        _, current_hard = resource.getrlimit(which)
        hard = soft if hard is None else hard
        if current_hard != resource.RLIM_INFINITY:
            soft, hard = min(soft, current_hard), min(hard, current_hard)
        plan.append((which, (soft, hard)))
    return plan


def exec_command(argv):
    for number in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(number, signal.SIG_DFL)  # Python ignores these; a fresh program should not
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        report_failure(REPORT_FD, "X", "cannot run %r: %s" % (argv[0], exc.strerror))
        os._exit(127 if isinstance(exc, FileNotFoundError) else 126)


def exec_python(code):
    # The server's own stdio objects wrap descriptors 0-2, now the run's pipes; it never used them.
    sys.stdin, sys.stdout, sys.stderr = sys.__stdin__, sys.__stdout__, sys.__stderr__
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main
    sys.argv[:] = ["-c"]
    sys.path.insert(0, "")
    status = 0
    try:
        compiled = compile(code, "<string>", "exec")
    except BaseException as exc:
        status = print_exception(exc, None)
    else:
        try:
            exec(compiled, main.__dict__)
        except SystemExit as exc:
            status = exit_status(exc)
        except BaseException as exc:
            status = print_exception(exc, exc.__traceback__.tb_next)  # hide this server's frame
    try:
        threading = sys.modules["threading"]
        if len(threading._active) > 1 or threading._limbo:
            threading._shutdown()  # like interpreter exit: wait for non-daemon threads
        atexit._run_exitfuncs()
    except BaseException:
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            status = status or 120
    os._exit(status & 0xFF)


def exit_status(exc):
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    try:
        print(exc.code, file=sys.stderr)
    except BaseException:
        pass
    return 1


def print_exception(exc, traceback):
    link = traceback
    while link is not None and link.tb_next is not None:
        if link.tb_next.tb_frame.f_code is on_sigint.__code__:
            link.tb_next = None  # the SIGINT handler is this server's frame, not the run's
        link = link.tb_next
    try:
        sys.excepthook(type(exc), exc, exc.with_traceback(traceback).__traceback__)
    except BaseException:
        pass
    return 1


# ---- the server: supervise, end, clean ----------------------------------------------------


def supervise(pid, enforced, stdin, stdin_w, outputs, started):
    """Wait for the child, the deadline or the output cap. Returns None, 'timeout' or 'output_limit'."""
    deadline = started + enforced["wall_limit_s"]
    cap = enforced["output_bytes"]
    pending = memoryview(stdin)
    pidfd = os.pidfd_open(pid)
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    for fd in outputs:
        poller.register(fd, select.POLLIN)
    if pending:
        os.set_blocking(stdin_w, False)
        poller.register(stdin_w, select.POLLOUT)
    else:
        os.close(stdin_w)
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout"
            for fd, _ in poller.poll(math.ceil(remaining * 1000)):
                if fd == pidfd:
                    return None
                if fd == stdin_w:
                    pending = feed(stdin_w, pending)
                    if not pending:
                        poller.unregister(stdin_w)
                        os.close(stdin_w)
                elif not read_capped(fd, outputs[fd], cap):
                    poller.unregister(fd)
                elif len(outputs[fd]) > cap:
                    return "output_limit"
    finally:
        os.close(pidfd)
        if pending:
            os.close(stdin_w)


def feed(fd, pending):
    try:
        return pending[os.write(fd, pending[:65536]) :]
    except BlockingIOError:
        return pending
    except OSError:
        return memoryview(b"")  # the child closed its stdin


def read_capped(fd, buffer, cap):
    data = os.read(fd, 65536)
    if data:
        buffer += data[: max(0, cap + 1 - len(buffer))]
    return bool(data)


def kill_everything():
    """SIGKILL every process of this namespace but this server (its init), and reap them all."""
    while True:
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            return
        while True:
            try:
                os.waitpid(-1, 0)
            except ChildProcessError:
                break


def classify(enforced, ending, wait_status, usage, stderr, note):
    if ending == "timeout":
        return "timeout", None, "wall time limit of %gs reached" % enforced["wall_limit_s"]
    if ending == "output_limit":
        return "output_limit", None, "output over %d bytes" % enforced["output_bytes"]
    code = os.waitstatus_to_exitcode(wait_status)
    if note.startswith("S"):
        return "error", None, "could not prepare the workspace: " + note[1:]
    if note.startswith("X"):
        return "error", code, note[1:]
    if code < 0:
        cpu_limit = enforced["cpu_limit_s"]
        cpu_used = usage.ru_utime + usage.ru_stime
        if -code == signal.SIGXCPU or (-code == signal.SIGKILL and cpu_used >= cpu_limit - 0.05):
            return "timeout", None, "CPU time limit of %gs reached" % cpu_limit
        return "killed", None, "killed by signal %s" % signal.Signals(-code).name
    if code != 0 and any(word in stderr[-4096:] for word in MEMORY_WORDS):
        return "memory_limit", code, "memory limit of %d MiB reached" % (enforced["address_space_bytes"] // MIB)
    return ("ok" if code == 0 else "error"), code, ""


def archive_workspace(limit):
    """The workspace as a tar of its directories and regular files, or None if over ``limit``."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:", format=tarfile.PAX_FORMAT) as tar:
        for root, dirs, files in os.walk(WORKSPACE):
            dirs.sort()
            for name in dirs + sorted(files):
                path = os.path.join(root, name)
                info = tar.gettarinfo(path, os.path.relpath(path, WORKSPACE))
                if not (info.isdir() or info.isfile()):
                    continue
                info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
                if info.isdir():
                    tar.addfile(info)
                else:
                    with open(path, "rb") as handle:
                        tar.addfile(info, handle)
                if buffer.tell() > limit:
                    return None
    return buffer.getvalue()


IPC_TABLES = (
    ("/proc/sysvipc/shm", lambda ident: libc.shmctl(ident, IPC_RMID, None)),
    ("/proc/sysvipc/msg", lambda ident: libc.msgctl(ident, IPC_RMID, None)),
    ("/proc/sysvipc/sem", lambda ident: libc.semctl(ident, 0, IPC_RMID)),
)


def ipc_is_denied():
    """Whether the seccomp filter denies SysV IPC; then no run can leave objects behind."""
    ident = libc.shmget(0, 4096, 0o600)  # IPC_PRIVATE
    if ident >= 0:
        libc.shmctl(ident, IPC_RMID, None)
        return False
    return ctypes.get_errno() == errno.EPERM


def remove_ipc_objects():
    for table, remove in IPC_TABLES:
        fd = os.open(table, os.O_RDONLY)
        try:
            rows = os.read(fd, 1 << 20).split(b"\n")[1:]
        finally:
            os.close(fd)
        for row in rows:
            if row.strip():
                remove(int(row.split()[1]))


def unlock_tree(path):
    """Give the owner full access to every directory below ``path`` (a run may have locked them)."""
    os.chmod(path, 0o700)
    for root, dirs, _ in os.walk(path):
        for name in dirs:
            child = os.path.join(root, name)
            if not os.path.islink(child):
                os.chmod(child, 0o700)


def empty_mounts():
    for mount, mode in SCRATCH_MODES.items():
        os.chmod(mount, 0o700)
        for entry in os.scandir(mount):
            if entry.is_dir(follow_symlinks=False):
                try:
                    shutil.rmtree(entry.path)
                except OSError:
                    unlock_tree(entry.path)
                    shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
        os.chmod(mount, mode)


def run_job(job):
    enforced = job["enforced"]
    started = time.monotonic()
    stdin_r, stdin_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    stderr_r, stderr_w = os.pipe()
    report_r, report_w = os.pipe()
    plan = RunPlan(job)
    sys.modules["random"].seed()  # each run gets its own random state, as a new process would
    pid = raw_fork()
    if pid < 0:
        raise OSError(ctypes.get_errno(), "fork failed")
    if pid == 0:
        try:
            child_main(job, plan, stdin_r, stdout_w, stderr_w, report_w)
        finally:
            os._exit(126)
    for fd in (stdin_r, stdout_w, stderr_w, report_w):
        os.close(fd)
    outputs = {stdout_r: bytearray(), stderr_r: bytearray()}
    ending = supervise(pid, enforced, plan.stdin, stdin_w, outputs, started)
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        pass
    _, wait_status, usage = os.wait4(pid, 0)
    wall_s = time.monotonic() - started
    kill_everything()
    cap = enforced["output_bytes"]
    for fd, buffer in outputs.items():
        os.set_blocking(fd, True)
        while read_capped(fd, buffer, cap):
            pass
        os.close(fd)
        if len(buffer) > cap and ending is None:
            ending = "output_limit"
    os.set_blocking(report_r, False)
    try:
        note = os.read(report_r, 4096).decode("utf-8", "replace")
    except BlockingIOError:
        note = ""
    os.close(report_r)
    stdout, stderr = outputs[stdout_r][:cap], outputs[stderr_r][:cap]
    status, exit_code, detail = classify(enforced, ending, wait_status, usage, stderr, note)
    reply = {
        "status": status,
        "exit_code": exit_code,
        "stdout": b64(stdout),
        "stderr": b64(stderr),
        "wall_s": wall_s,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "detail": detail,
        "snapshot": None,
        "restart": False,
    }
    if job.get("capture"):
        try:
            archive = archive_workspace(enforced["snapshot_bytes"])
            problem = "workspace too large to snapshot"
        except OSError as exc:
            archive, problem = None, "could not snapshot the workspace: %s" % exc
        if archive is None:
            reply["detail"] = add_note(detail, problem)
        else:
            reply["snapshot"] = b64(archive)
    try:
        if not IPC_DENIED:
            remove_ipc_objects()
        empty_mounts()
    except Exception as exc:
        reply["restart"] = True
        reply["detail"] = add_note(reply["detail"], "sandbox replaced: %s" % exc)
    return reply


def add_note(detail, note):
    return detail + "; " + note if detail else note


def on_sigint(signum, frame):
    """SIGINT in a run is KeyboardInterrupt, as in any Python; sent to this server (a run can
    signal its init because a handler is installed) it is ignored. One handler for both, so
    that no run pays for installing its own."""
    if os.getpid() != 1:
        raise KeyboardInterrupt


def main():
    control_in, control_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    with open("/proc/self/oom_score_adj", "w") as handle:
        handle.write("1000")  # inherited: out of memory, the largest process of a run goes first
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    signal.signal(signal.SIGINT, on_sigint)
    sys.dont_write_bytecode = True
    for name in WARM_MODULES:
        __import__(name)
    global IPC_DENIED
    IPC_DENIED = ipc_is_denied()
    gc.freeze()  # a run's collections then skip the warm heap instead of copying its pages
    write_message(control_out, {"ready": True})
    while True:
        job = read_message(control_in)
        if job is None:
            return
        write_message(control_out, run_job(job))


if __name__ == "__main__":
    main()
