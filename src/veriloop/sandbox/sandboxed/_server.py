"""The sandbox server: a warm interpreter inside bubblewrap that runs one child per job.

The host (``_server_handle.py``) starts it as ``python3 -I -c <this source> [MODULE...]``, the
modules being an environment's to pre-import. It never imports
veriloop (standard library only, Python >= 3.9). It reads jobs on stdin and answers on stdout,
each a frame (``read_frame``): a JSON header, then files, archives and outputs as raw bytes. Each
job carries ``enforced``: the limits of the run as exact numbers, computed
by the host (``_limits.enforced_limits``); the server applies them and derives none of its own.

At start, before it reads any job, the server forks a *template*: a copy of the warm interpreter
that never reads job data. Runs are copies of the template, never of the server (which has held
earlier runs' code and outputs), so no run can find another's data in its memory. For each job

1. the template clones a child with ``CLONE_PARENT`` (so the child is the server's own, to wait
   for and account), asked for between jobs so that its making overlaps the host's turnaround,
   after checking that its own limits, priority, affinity and OOM score are those it started
   with, and moving to a fresh network namespace if the last run left sockets in its own
   (TIME_WAIT ones outlive every process); the server sends the job over a pipe, and the child
   unpacks the workspace and applies the rlimits (the seccomp filter that keeps it from
   signalling the template it inherits: the template loads it on itself), then runs the Python source in a fresh ``__main__`` (the fast path: a copy of a
   warm process, not an interpreter start) or execs the command;
2. the server feeds stdin, keeps at most the cap of stdout and stderr, and enforces the deadline;
3. it SIGKILLs every other process of the PID namespace but the template and reaps them all
   (they are all the run's, and as the namespace's init the server inherits every orphan);
4. it answers with the outcome (a snapshot asked for is streamed from the workspace into the
   answer, never held in memory), or asks the host for a fresh sandbox if the template died or
   its own or the template's process settings changed;
5. it empties every writable mount (and removes SysV IPC objects where the seccomp filter does
   not deny them), so nothing of the run survives into the next one; a server that cannot
   exits, and the host starts a fresh sandbox before the next job. Each answer
   follows one byte: ``S``, sent the moment the job is handed to the run's process (a server the
   host loses after it ran a job that may have started), or ``U`` for a job no process could
   be made for (it never started: the host runs it on a fresh sandbox).

The server is the PID namespace's init, so the run's processes cannot signal it (the kernel
drops their signals to an init without handlers); neither it nor the template is dumpable, so
runs can neither ptrace them nor open their /proc files.
"""

import atexit
import builtins
import ctypes
import errno
import fcntl
import gc
import json
import math
import os
import platform
import resource
import select
import shutil
import signal
import socket
import stat
import struct
import sys
import time
import types

WORKSPACE = "/workspace"
REPORT_FD = 3  # in the child: where it reports a failed setup or exec (close-on-exec)
SPAWN_FDS = 5  # the descriptors the server hands the template for a child: job, stdin, stdout, stderr, report
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
raw_syscall = ctypes.PyDLL(None, use_errno=True).syscall
CLONE_PARENT = 0x8000
CLONE_SYSCALL = {"x86_64": 56, "aarch64": 220}.get(platform.machine())
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
CAP_SYS_ADMIN = 21
CLONE_NEWNET = 0x40000000
SIOCSIFFLAGS, IFF_UP, IFF_RUNNING = 0x8914, 0x1, 0x40
SOCKET_TABLE = "/proc/self/net/sockstat"  # counts sockets of every family, TIME_WAIT and orphans included


def read_exact(fd, size):
    """``size`` bytes from ``fd``, or None if it closes first."""
    buffer = bytearray(size)
    view, done = memoryview(buffer), 0
    while done < size:
        got = os.readv(fd, [view[done : done + MIB]])
        if not got:
            return None
        done += got
    return bytes(buffer)


def read_frame(fd):
    """``(header bytes, header, blobs)`` of the next frame on ``fd``, or None at its end.

    A frame is a 4-byte big-endian length, that many bytes of JSON (the header), then the raw
    bytes of each blob whose length the header lists in ``blobs``: files, archives and outputs
    travel as they are, never as base64 inside the JSON.
    """
    size = read_exact(fd, 4)
    raw = None if size is None else read_exact(fd, struct.unpack(">I", size)[0])
    if raw is None:
        return None
    header = json.loads(raw)
    blobs = []
    for length in header.get("blobs", ()):
        blob = read_exact(fd, length)
        if blob is None:
            return None
        blobs.append(blob)
    return raw, header, blobs


def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def write_frame(fd, header, blobs=()):
    data = json.dumps(dict(header, blobs=[len(blob) for blob in blobs])).encode()
    write_all(fd, struct.pack(">I", len(data)) + data)
    for blob in blobs:
        write_all(fd, blob)


def report_failure(fd, kind, text):
    try:
        os.write(fd, (kind + text)[:2000].encode("utf-8", "replace"))
    except OSError:
        pass


# ---- the child: prepare, limit, run -------------------------------------------------------


def child_main(fds):
    """The run's process, a fresh copy of the template: it receives its job only now.

    Every page it writes is copied from the template for it, so it does as little as it can
    before the run: the server sends the job already digested (``child_job``), read here with
    a few struct calls instead of a JSON parser."""
    job_r, stdin_r, stdout_w, stderr_w, report_w = fds
    try:
        drop_capabilities()  # the template's, kept for making network namespaces; a run has none
        size = read_exact(job_r, 8)
        plan = RunPlan(read_exact(job_r, struct.unpack("=Q", size)[0])) if size is not None else None
        if plan is None or plan.truncated:
            os._exit(126)  # the server sent no job: it is gone or gave up on this run
        os.setsid()
        os.dup2(stdin_r, 0)
        os.dup2(stdout_w, 1)
        os.dup2(stderr_w, 2)
        os.dup2(report_w, REPORT_FD, inheritable=False)
        os.closerange(4, 1 << 20)  # the template's socket among them: a run must not ask it for copies
        libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
        os.chdir(WORKSPACE)
        if plan.files or plan.archive:
            prepare_workspace(plan)
        for which, pair in zip(PLANNED_RLIMITS, plan.rlimits):
            resource.setrlimit(which, pair)
    except BaseException as exc:
        report_failure(REPORT_FD, "S", "%s: %s" % (type(exc).__name__, exc))
        os._exit(126)
    if plan.argv is not None:
        exec_command(plan.argv)
    exec_python(plan.code)


PLANNED_RLIMITS = (
    resource.RLIMIT_AS,
    resource.RLIMIT_CPU,
    resource.RLIMIT_NPROC,
    resource.RLIMIT_NOFILE,
    resource.RLIMIT_FSIZE,
    resource.RLIMIT_CORE,
    resource.RLIMIT_MSGQUEUE,  # POSIX message queues would outlive the run
)
CHILD_HEAD = struct.Struct("=c%dqQQQQ" % (2 * len(PLANNED_RLIMITS)))  # kind, rlimits, code, argv, files, archive
CHILD_FILE = struct.Struct("=QQ")  # name and content lengths


def child_job(job, blobs):
    """The job as the run's process reads it (``RunPlan``): a fixed struct of its kind, rlimits
    and lengths, then the file names and lengths, the code, the arguments, the files' contents
    and the workspace archive, as bytes."""
    limits = [value for pair in rlimit_plan(job["enforced"]) for value in pair]
    code = job["code"].encode("utf-8", "surrogatepass") if job["kind"] != "exec" else b""
    argv = b"\0".join(arg.encode("utf-8", "surrogateescape") for arg in job["argv"]) if job["kind"] == "exec" else b""
    files = [(name.encode("utf-8", "surrogateescape"), blobs[index]) for name, index in job["files"].items()]
    index = job.get("archive")
    archive = blobs[index] if index is not None else b""
    kind = b"X" if job["kind"] == "exec" else b"P"
    parts = [CHILD_HEAD.pack(kind, *limits, len(code), len(argv), len(files), len(archive))]
    parts += [CHILD_FILE.pack(len(name), len(content)) for name, content in files]
    parts += [code, argv, *[name for name, _ in files], *[content for _, content in files], archive]
    return parts


class RunPlan:
    """What the run's process needs of its job, read from ``child_job``'s bytes."""

    def __init__(self, data):
        self.truncated = data is None
        if data is None:
            return
        view = memoryview(data)
        head = CHILD_HEAD.unpack_from(view)
        kind, limits, (code_size, argv_size, file_count, archive_size) = head[0], head[1:-4], head[-4:]
        self.rlimits = [(limits[i], limits[i + 1]) for i in range(0, len(limits), 2)]
        offset = CHILD_HEAD.size
        sizes = [CHILD_FILE.unpack_from(view, offset + i * CHILD_FILE.size) for i in range(file_count)]
        offset += file_count * CHILD_FILE.size
        self.code = str(view[offset : offset + code_size], "utf-8", "surrogatepass")
        offset += code_size
        argv = bytes(view[offset : offset + argv_size])
        self.argv = [os.fsdecode(arg) for arg in argv.split(b"\0")] if kind == b"X" else None
        offset += argv_size
        names = []
        for name_size, _ in sizes:
            names.append(str(view[offset : offset + name_size], "utf-8", "surrogateescape"))
            offset += name_size
        self.files = []
        for name, (_, content_size) in zip(names, sizes):
            self.files.append((name, view[offset : offset + content_size]))
            offset += content_size
        self.archive = view[offset : offset + archive_size] if archive_size else b""


def prepare_workspace(plan):
    made = set()
    if plan.archive:
        unpack(plan.archive, made)
    for name, content in plan.files:
        write_file(name, content, 0o644, made)


def write_file(name, content, mode, made):
    parent = os.path.dirname(name)
    if parent and parent not in made:
        os.makedirs(parent, exist_ok=True)
        made.add(parent)
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        write_all(fd, content)
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def unpack(archive, made):
    """Unpack the directories and regular files of a tar archive (ustar, pax or GNU long
    names) into the current directory; every other member is left out, as are names that
    would leave it. A plain reader: ``tarfile`` takes ten times as long per member."""
    view = memoryview(archive)
    offset, long_name = 0, None
    while offset + 512 <= len(view):
        block = bytes(view[offset : offset + 512])
        if block == bytes(512):
            return
        size = tar_number(block[124:136])
        kind = block[156:157]
        start, offset = offset + 512, offset + 512 + (size + 511) // 512 * 512
        if start + size > len(view):
            raise ValueError("the workspace archive ends inside a member")
        if kind in (b"x", b"L"):  # a pax header or a GNU long name for the next member
            data = bytes(view[start : start + size])
            long_name = pax_path(data) if kind == b"x" else data.rstrip(b"\0").decode("utf-8", "replace")
            continue
        if kind == b"g":
            continue
        name, long_name = long_name or tar_name(block), None
        name = os.path.normpath(name)
        if name.startswith("/") or name == "." or ".." in name.split("/"):
            continue
        if kind == b"5":
            os.makedirs(name, exist_ok=True)
            made.add(name)
        elif kind in (b"0", b"\0", b"7"):
            write_file(name, view[start : start + size], tar_number(block[100:108]) & 0o777, made)


def tar_number(field):
    if field[:1] in (b"\x80", b"\xff"):  # base-256, for sizes past the octal field
        value = int.from_bytes(field[1:], "big")
        return value - (1 << (8 * len(field) - 8)) if field[:1] == b"\xff" else value
    digits = field.split(b"\0", 1)[0].strip()
    return int(digits, 8) if digits else 0


def tar_name(block):
    name = block[0:100].split(b"\0", 1)[0]
    if block[257:262] == b"ustar":
        prefix = block[345:500].split(b"\0", 1)[0]
        if prefix:
            name = prefix + b"/" + name
    return name.decode("utf-8", "replace")


def pax_path(data):
    """The ``path`` record of a pax extended header, or None."""
    found, position = None, 0
    while position < len(data):
        space = data.index(b" ", position)
        length = int(data[position:space])
        key, _, value = data[space + 1 : position + length - 1].partition(b"=")
        if key == b"path":
            found = value.decode("utf-8", "replace")
        position += length
    return found


def rlimit_plan(enforced):
    """``[(soft, hard), ...]`` for each of ``PLANNED_RLIMITS``, never above this server's hard
    limits (the template's and so the run's: the server checks they are the same)."""
    memory = enforced["address_space_bytes"]
    wanted = (
        (memory, memory),
        (enforced["cpu_soft_s"], enforced["cpu_hard_s"]),  # SIGXCPU first, then SIGKILL
        (enforced["tasks"], None),
        (enforced["open_files"], None),
        (enforced["file_bytes"], None),
        (0, None),
        (0, None),
    )
    plan = []
    for which, (soft, hard) in zip(PLANNED_RLIMITS, wanted):
        _, current_hard = resource.getrlimit(which)
        hard = soft if hard is None else hard
        if current_hard != resource.RLIM_INFINITY:
            soft, hard = min(soft, current_hard), min(hard, current_hard)
        plan.append((soft, hard))
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


# ---- the template: the process every run is a copy of ---------------------------------------


RLIMITS = tuple(getattr(resource, name) for name in sorted(dir(resource)) if name.startswith("RLIMIT_"))


OWN_FILES = {}  # (pid, path) -> a descriptor kept open, so a check costs a read, not an open


def own_file(path):
    """This process's own open descriptor of ``path`` (a /proc/self file)."""
    key = (os.getpid(), path)
    if key not in OWN_FILES:
        OWN_FILES[key] = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    return OWN_FILES[key]


def process_settings():
    """What a process passes on to its children and a run could try to change in another:
    rlimits, nice value, scheduling policy, CPU affinity and OOM score."""
    oom = os.pread(own_file("/proc/self/oom_score_adj"), 64, 0)
    limits = tuple(map(resource.getrlimit, RLIMITS))
    return limits, os.getpriority(os.PRIO_PROCESS, 0), os.sched_getscheduler(0), os.sched_getaffinity(0), oom


def clone_parent():
    """A copy of this process that is a child of this process's parent (the server)."""
    if CLONE_SYSCALL is not None:
        return raw_syscall(CLONE_SYSCALL, CLONE_PARENT | signal.SIGCHLD, 0, 0, 0, 0)
    reader, writer = os.pipe()  # elsewhere: fork twice; the orphan is reparented to the server, the init
    middle = raw_fork()
    if middle == 0:
        pid = raw_fork()
        if pid:
            os.write(writer, struct.pack("=i", pid))
            os._exit(0)
        os.close(reader)
        os.close(writer)
        return 0
    os.close(writer)
    answer = os.read(reader, 4)
    os.close(reader)
    os.waitpid(middle, 0)
    return struct.unpack("=i", answer)[0] if len(answer) == 4 else -1


# capset(2) and its arguments, made once: building them in each run's process would write to
# dozens of pages it shares with the template, each then copied for it.
CAP_HEADER = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
CAP_NONE = (ctypes.c_uint32 * 6)()
capset = libc.capset  # looked up once: a lookup in each run's process makes and caches a function object


def drop_capabilities():
    if capset(CAP_HEADER, CAP_NONE):
        raise OSError(ctypes.get_errno(), "could not drop capabilities")
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)


def may_make_networks():
    """Whether this process holds CAP_SYS_ADMIN (in the sandbox's user namespace): given by
    bubblewrap to sandboxes without network access, so that the template can renew its own."""
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> CAP_SYS_ADMIN & 1)
    return False


def socket_counts():
    """This network namespace's own socket counters: sockets in use (of every family, orphaned
    TCP ones included) and TIME_WAIT ones. They differ from a fresh namespace's when a run left a
    socket behind. (The table's alloc, orphan and mem figures count every namespace: left out.)"""
    lines = os.pread(own_file(SOCKET_TABLE), 1 << 16, 0).split(b"\n")
    counts = []
    for line in lines:
        words = line.split()
        counts += [words[index + 1] for index, word in enumerate(words) if word in (b"used", b"inuse", b"tw")]
    return counts


def fresh_network():
    """Move this process into a new network namespace with only ``lo``, up (as bubblewrap
    leaves the sandbox's). The old one goes with its last process, and its sockets with it."""
    if libc.unshare(CLONE_NEWNET):
        raise OSError(ctypes.get_errno(), "could not make a network namespace")
    os.close(OWN_FILES.pop((os.getpid(), SOCKET_TABLE)))  # it shows the old namespace's sockets
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        fcntl.ioctl(probe, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", IFF_UP | IFF_RUNNING))


def template_main(requests, settings):
    """Serve copies of this process until the server goes. Each request carries only the
    descriptors the copy will use; the template never reads job data, so it never holds any.
    Before a copy, a network namespace a run left sockets in (TIME_WAIT ones outlive every
    process) is replaced, so that each run starts from a network as fresh as its files."""
    guard = guard_filter(os.getpid())
    if guard is not None and libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(guard), 0, 0):
        os._exit(1)  # the server finds its template gone and the host replaces the sandbox
    renew = may_make_networks()
    clean = socket_counts()
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(requests, 16, SPAWN_FDS)
        except OSError:
            os._exit(0)
        if not message:
            os._exit(0)
        pid = -1
        if renew and socket_counts() != clean:
            try:
                fresh_network()
                clean = socket_counts()
            except OSError:
                settings = None  # no copy in a used network: the server replaces the sandbox
        if len(fds) == SPAWN_FDS and process_settings() == settings:
            sys.modules["random"].seed()  # each run gets its own random state, as a new process would
            pid = clone_parent()
            if pid == 0:
                requests.detach()
                child_main(fds)
        for fd in fds:
            os.close(fd)
        requests.send(struct.pack("=i", pid))


class Template:
    """The server's handle on its template process."""

    def __init__(self, control_fds):
        self.requests, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        settings = process_settings()
        pid = raw_fork()
        if pid < 0:
            raise OSError(ctypes.get_errno(), "fork failed")
        if pid == 0:
            try:
                self.requests.close()
                null = os.open(os.devnull, os.O_RDWR)
                for fd in control_fds:
                    os.dup2(null, fd)  # the host's pipes are the server's alone (and keep fds 3-4 taken)
                os.close(null)
                template_main(theirs, settings)
            finally:
                os._exit(0)
        theirs.close()
        self.pid = pid

    def request(self, fds):
        """Ask for a run's process holding ``fds``; False if the template is gone."""
        try:
            socket.send_fds(self.requests, [b"c"], fds)
        except OSError:
            return False
        return True

    def answer(self):
        """The pid of the process last requested, or None if the template could not make it."""
        try:
            answer = self.requests.recv(4)
        except OSError:
            return None
        pid = struct.unpack("=i", answer)[0] if len(answer) == 4 else -1
        return pid if pid > 0 else None


GUARDED_CALLS = {  # x86_64: the calls that send a signal to the process named by their first argument
    "kill": 62,
    "rt_sigqueueinfo": 129,
    "tkill": 200,
    "tgkill": 234,
    "rt_tgsigqueueinfo": 297,
    "pidfd_open": 434,
}
PIDFD_SEND_SIGNAL = 424  # x86_64; takes a pidfd, or a /proc/PID directory, whose target a filter cannot see


def guard_filter(template_pid):
    """A seccomp program (``struct sock_fprog``) the template loads on itself, and so every run
    it clones inherits: no signal reaches the template (EPERM), and ``kill(-1)`` (every process
    but init and the caller) answers ESRCH as if the run were alone, since the only others it
    could reach are its own. (Namespaces a run cannot make: it holds no capability, and
    bubblewrap allows no user namespace.) None off x86_64."""
    if platform.machine() != "x86_64":
        return None
    ld, jeq, ret = 0x20, 0x15, 0x06
    allow, eperm, esrch = 0x7FFF0000, 0x00050000 | errno.EPERM, 0x00050000 | errno.ESRCH
    numbers = sorted(GUARDED_CALLS.values())
    code = [(ld, 0, 0, 0)]  # seccomp_data.nr; the filter bubblewrap loads already kills other architectures
    for index, number in enumerate(numbers):
        code.append((jeq, len(numbers) - index + 2, 0, number))  # to the argument check
    code.append((jeq, 0, 1, PIDFD_SEND_SIGNAL))
    code.append((ret, 0, 0, eperm))
    code.append((ret, 0, 0, allow))
    code.append((ld, 0, 0, 16))  # the low half of args[0]: a pid is an int
    code.append((jeq, 3, 0, 0xFFFFFFFF))
    code.append((jeq, 3, 0, template_pid))
    code.append((jeq, 2, 0, -template_pid & 0xFFFFFFFF))  # its process group
    code.append((ret, 0, 0, allow))
    code.append((ret, 0, 0, esrch))
    code.append((ret, 0, 0, eperm))
    program = ctypes.create_string_buffer(b"".join(struct.pack("=HBBI", *op) for op in code))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(code), ctypes.addressof(program))
    fprog.program = program  # keeps the instructions alive as long as the header
    return fprog


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


def others(spare):
    """Every process of this namespace but this server (its init) and ``spare``."""
    return [int(name) for name in os.listdir("/proc") if name.isdigit() and int(name) not in (1, spare)]


def kill_everything(spare):
    """SIGKILL every process of this namespace but this server and ``spare`` (the template), and
    reap them all. A process the kill missed was forked by one it reached, and an orphan becomes
    this server's child once its parent is reaped: the next round gets both. Returns whether
    ``spare`` was reaped (it died)."""
    spare_reaped = False
    while True:
        pids = others(spare)
        if not pids:
            return spare_reaped
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            reaped, _ = os.waitpid(-1, 0)  # blocks until one of them is gone, rather than spinning
        except ChildProcessError:
            time.sleep(0.001)  # none is this server's child yet: their parents are still exiting
            continue
        spare_reaped = spare_reaped or reaped == spare


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


def plan_archive(limit):
    """``(entries, size)`` of the workspace as a tar of its directories and regular files: each
    entry a path, its tar header and its length, and ``size`` the archive's exact length. The
    archive is written later, straight into the answer (``stream_archive``), so a snapshot is
    never held in memory. None if the archive would be over ``limit``, or its files' sizes add
    up to more than the mount holds (only sparse files can: their holes would come back as
    zeros); an OSError for a file or folder that cannot be read (a run may lock them)."""
    stats = os.statvfs(WORKSPACE)
    content_left = stats.f_blocks * stats.f_frsize
    entries, size = [], 2 * 512  # the two zero blocks that end an archive

    def unreadable(error):
        raise error

    for root, dirs, files in os.walk(WORKSPACE, onerror=unreadable):
        dirs.sort()
        for name in dirs + sorted(files):
            path = os.path.join(root, name)
            info = os.lstat(path)
            if stat.S_ISDIR(info.st_mode):
                kind, length = b"5", 0
            elif stat.S_ISREG(info.st_mode):
                kind, length = b"0", info.st_size
                content_left -= length
                if not os.access(path, os.R_OK):
                    raise PermissionError(errno.EACCES, "cannot read", os.path.relpath(path, WORKSPACE))
            else:
                continue
            header = tar_header(os.path.relpath(path, WORKSPACE), kind, info.st_mode & 0o777, length)
            size += len(header) + (length + 511) // 512 * 512
            if content_left < 0 or size > limit:
                return None
            entries.append((path, header, length))
    return entries, size


def tar_header(name, kind, mode, length):
    """A ustar header (preceded by a pax header when the name does not fit its field)."""
    encoded = name.encode("utf-8", "surrogateescape")
    if len(encoded) <= 100 and encoded.isascii():
        return ustar_block(encoded, kind, mode, length)
    record = b" path=" + encoded + b"\n"
    digits = len(str(len(record)))
    while len(str(len(record) + digits)) != digits:
        digits += 1
    record = str(len(record) + digits).encode() + record
    pax = ustar_block(b"././@PaxHeader", b"x", 0o644, len(record)) + record + bytes(-len(record) % 512)
    return pax + ustar_block(encoded[:100], kind, mode, length)


def ustar_block(name, kind, mode, length):
    fields = [
        name.ljust(100, b"\0"),
        b"%07o\0" % mode,
        b"%07o\0" % 0,
        b"%07o\0" % 0,
        b"%011o\0" % length,
        b"%011o\0" % 0,
        b" " * 8,
        kind,
        bytes(100),
        b"ustar\x0000",
        bytes(32),
        bytes(32),
        bytes(8),
        bytes(8),
        bytes(155),
    ]
    block = bytearray(b"".join(fields).ljust(512, b"\0"))
    block[148:156] = b"%06o\0 " % sum(block)
    return bytes(block)


def stream_archive(fd, entries):
    """Write the planned archive to ``fd``: each header, then the file's bytes, padded."""
    for path, header, length in entries:
        write_all(fd, header)
        if not length:
            continue
        source = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            left = length
            while left:
                chunk = os.read(source, min(left, MIB))
                if not chunk:
                    raise OSError(errno.EIO, "a file of the workspace shrank while it was sent", path)
                write_all(fd, chunk)
                left -= len(chunk)
        finally:
            os.close(source)
        write_all(fd, bytes(-length % 512))
    write_all(fd, bytes(1024))


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


def mounts_below(tops):
    """Mount points strictly inside the directories ``tops`` (read-only binds of an interpreter
    or environment kept under /tmp, say) and every directory on the way to them."""
    with open("/proc/self/mountinfo", "rb") as handle:
        points = [line.split()[4].decode() for line in handle]
    kept, on_the_way = set(), set()
    for point in points:
        for top in tops:
            if point.startswith(top + "/"):
                kept.add(point)
                parent = os.path.dirname(point)
                while parent != top:
                    on_the_way.add(parent)
                    parent = os.path.dirname(parent)
    return frozenset(kept), frozenset(on_the_way - kept)


def empty_directory(path, mode):
    """Remove everything in ``path`` but the mounts below it, and give it ``mode`` again."""
    os.chmod(path, 0o700)
    for entry in os.scandir(path):
        if entry.path in KEPT_MOUNTS:
            continue
        if entry.path in KEPT_PARENTS and entry.is_dir(follow_symlinks=False):
            empty_directory(entry.path, 0o755)
        elif entry.is_dir(follow_symlinks=False):
            try:
                shutil.rmtree(entry.path)
            except OSError:
                unlock_tree(entry.path)
                shutil.rmtree(entry.path)
        else:
            os.unlink(entry.path)
    os.chmod(path, mode)


def empty_mounts():
    for mount, mode in SCRATCH_MODES.items():
        empty_directory(mount, mode)


class Child:
    """The next run's process, asked of the template between jobs (so that its making overlaps
    the host's reading of the last answer), and the server's ends of its pipes."""

    def __init__(self, template):
        pipes = [os.pipe() for _ in range(SPAWN_FDS)]
        theirs = (pipes[0][0], pipes[1][0], pipes[2][1], pipes[3][1], pipes[4][1])
        self.ends = (pipes[0][1], pipes[1][1], pipes[2][0], pipes[3][0], pipes[4][0])
        self.template = template
        self.asked = template.request(theirs)
        for fd in theirs:
            os.close(fd)

    def pid(self):
        """Its pid once the template has made it, or None (its pipes are then closed)."""
        pid = self.template.answer() if self.asked else None
        if pid is None:
            for fd in self.ends:
                os.close(fd)
        return pid


def run_job(frame, child):
    _, job, blobs = frame
    enforced = job["enforced"]
    started = time.monotonic()
    pid = child.pid()
    if pid is None:
        return unserved(started)
    job_w, stdin_w, stdout_r, stderr_r, report_r = child.ends
    if process_settings() != SETTINGS:
        os.close(job_w)  # the child exits without a job
        for fd in (stdin_w, stdout_r, stderr_r, report_r):
            os.close(fd)
        os.waitpid(pid, 0)
        return unserved(started)
    try:
        parts = child_job(job, blobs)
        write_all(job_w, struct.pack("=Q", sum(map(len, parts))))
        for part in parts:
            write_all(job_w, part)
    except OSError:
        pass  # the child is gone; its wait status tells the rest
    os.close(job_w)
    write_all(CONTROL_OUT, STARTED)  # from here the run may have begun: a host that loses us now reports it killed
    outputs = {stdout_r: bytearray(), stderr_r: bytearray()}
    ending = supervise(pid, enforced, blobs[job["stdin"]], stdin_w, outputs, started)
    os.kill(pid, signal.SIGKILL)  # the rest once it is reaped: its rusage then counts its own reaped children
    _, wait_status, usage = os.wait4(pid, 0)
    wall_s = time.monotonic() - started
    template_died = kill_everything(TEMPLATE_PID)
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
        "stdout": bytes(stdout),
        "stderr": bytes(stderr),
        "wall_s": wall_s,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "detail": detail,
        "snapshot": None,
        "restart": False,
    }
    if job.get("capture"):
        plan_into(reply, enforced["snapshot_bytes"])
    if template_died or os.waitpid(TEMPLATE_PID, os.WNOHANG)[0] or ended_or_ending(TEMPLATE_PID):
        reply["restart"] = True
        reply["detail"] = add_note(reply["detail"], "sandbox replaced: the run ended its template process")
    return reply


PF_EXITING = 0x4


def ended_or_ending(pid):
    """Whether ``pid`` has exited, is exiting, or has a SIGKILL pending: a signal a run sent it
    (one the seccomp filter cannot see, such as SIGIO) may still be on its way when the run ends."""
    try:
        stat = os.pread(own_file("/proc/%d/stat" % pid), 4096, 0)
        status = os.pread(own_file("/proc/%d/status" % pid), 8192, 0)
    except OSError:
        return True
    fields = stat.rpartition(b")")[2].split()
    if fields[0] in (b"Z", b"X", b"x") or int(fields[6]) & PF_EXITING:
        return True
    for line in status.split(b"\n"):
        if line.startswith((b"SigPnd:", b"ShdPnd:")) and int(line.split()[1], 16) >> (signal.SIGKILL - 1) & 1:
            return True
    return False


def unserved(started):
    """The answer for a job no process could be made for: the host replaces this sandbox and
    sends the job, which never started, to the next one."""
    detail = "sandbox replaced: the template process is gone or its settings were changed"
    if process_settings() != SETTINGS:
        detail = "sandbox replaced: the server's process settings were changed"
    return {
        "status": "killed",
        "exit_code": None,
        "stdout": b"",
        "stderr": b"",
        "wall_s": time.monotonic() - started,
        "cpu_s": 0.0,
        "detail": detail,
        "snapshot": None,
        "restart": True,
        "started": False,
    }


def plan_into(reply, limit):
    try:
        plan = plan_archive(limit)
        problem = "workspace too large to snapshot"
    except OSError as exc:
        plan, problem = None, "could not snapshot the workspace: %s" % exc
    if plan is None:
        reply["detail"] = add_note(reply["detail"], problem)
    else:
        reply["snapshot"] = plan


def send_reply(fd, reply):
    """The answer as a frame: its outputs as blobs after the JSON, then the planned snapshot
    streamed from the workspace as the last blob."""
    outputs = [reply.pop("stdout"), reply.pop("stderr")]
    plan = reply.pop("snapshot")
    lengths = [len(blob) for blob in outputs] + ([plan[1]] if plan is not None else [])
    data = json.dumps(dict(reply, snapshot=plan is not None, blobs=lengths)).encode()
    write_all(fd, struct.pack(">I", len(data)) + data)
    for blob in outputs:
        write_all(fd, blob)
    if plan is not None:
        stream_archive(fd, plan[0])


def clean_scratch():
    """Remove what the run left (SysV IPC objects, the mounts' contents), after its answer has
    gone (its snapshot is read from the workspace as it is sent). A sandbox that cannot be
    cleaned ends here: the host finds it gone before the next job and starts a fresh one."""
    try:
        if not IPC_DENIED:
            remove_ipc_objects()
        empty_mounts()
    except Exception:
        os._exit(3)


def add_note(detail, note):
    return detail + "; " + note if detail else note


def on_sigint(signum, frame):
    """SIGINT in a run is KeyboardInterrupt, as in any Python; sent to this server (a run can
    signal its init because a handler is installed) it is ignored. One handler for both, so
    that no run pays for installing its own."""
    if os.getpid() != 1:
        raise KeyboardInterrupt


KEPT_MOUNTS, KEPT_PARENTS = frozenset(), frozenset()  # set at start: mounts inside the scratch mounts
SETTINGS = None  # process_settings() of this server at start, checked before each job
CONTROL_OUT = None  # the host's pipe
STARTED, UNSERVED = b"S", b"U"  # before an answer: whether the job was handed to a run, or never was
TEMPLATE_PID = None  # spared when the server ends a run's processes


def main():
    control_in, control_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    signal.signal(signal.SIGINT, on_sigint)
    sys.dont_write_bytecode = True
    for name in WARM_MODULES:
        __import__(name)
    for name in sys.argv[1:]:  # the environment's own (checked to import when it was built)
        try:
            __import__(name)
        except Exception:
            pass  # a warm module saves time; without it a run imports it itself
    global CONTROL_OUT, IPC_DENIED, KEPT_MOUNTS, KEPT_PARENTS, SETTINGS, TEMPLATE_PID
    CONTROL_OUT = control_out
    IPC_DENIED = ipc_is_denied()
    KEPT_MOUNTS, KEPT_PARENTS = mounts_below(tuple(SCRATCH_MODES))
    for mount, mode in SCRATCH_MODES.items():
        os.chmod(mount, mode)  # bubblewrap makes them 0755; the first run gets what every later one does
    SETTINGS = process_settings()
    gc.freeze()  # a run's collections then skip the warm heap instead of copying its pages
    template = Template((control_in, control_out))  # before the first job: it never sees one
    TEMPLATE_PID = template.pid
    drop_capabilities()  # only the template needs them
    child = Child(template)
    write_frame(control_out, {"ready": True})
    while True:
        frame = read_frame(control_in)
        if frame is None:
            return
        reply = run_job(frame, child)
        child = Child(template)  # made while the host reads the answer
        if not reply.pop("started", True):
            write_all(control_out, UNSERVED)
        send_reply(control_out, reply)
        clean_scratch()


if __name__ == "__main__":
    main()
