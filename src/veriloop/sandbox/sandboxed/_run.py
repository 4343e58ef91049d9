"""The run's process: a fresh copy of the template that receives its job, prepares the workspace,
applies the rlimits and runs the code or the command (part of the server's script)."""

import atexit
import builtins
import ctypes
import marshal
import os
import resource
import signal
import struct
import sys
import types

from veriloop.sandbox.sandboxed._frames import read_exact, report_failure  # sandbox: strip
from veriloop.sandbox.sandboxed._kernel import PR_SET_DUMPABLE, drop_capabilities, libc  # sandbox: strip
from veriloop.sandbox.sandboxed._scratch import WORKSPACE  # sandbox: strip
from veriloop.sandbox.sandboxed._workspace_files import prepare_workspace  # sandbox: strip

REPORT_FD = 3  # in the child: where it reports a failed setup or exec (close-on-exec)
JOB_LENGTH = struct.Struct("=Q")  # before the job's bytes
SIG_SETMASK = 2
NO_SIGNALS = ctypes.create_string_buffer(128)  # an empty sigset_t: the mask a run starts with


def child_main(fds):
    """The run's process, a fresh copy of the template: it receives its job only now.

    Every page it writes is copied from the template for it, so it does as little as it can
    before the run: the server sends the job already digested (``child_job``), read here with
    a few struct calls instead of a JSON parser."""
    job_r, stdin_r, stdout_w, stderr_w, report_w = fds
    try:
        libc.pthread_sigmask(SIG_SETMASK, NO_SIGNALS, None)  # the template blocks every signal; a run none
        drop_capabilities()  # the template's, kept for making network namespaces; a run has none
        plan = RunPlan(read_job(job_r))
        if plan.truncated:
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


JOB_FIRST_READ = 4096  # a snippet's whole job, its length included, comes in one read


def read_job(fd):
    """The bytes of ``child_job`` from ``fd`` (after their 8-byte length), or None if it
    closes first."""
    data = os.read(fd, JOB_FIRST_READ)
    if 0 < len(data) < 8:
        rest = read_exact(fd, 8 - len(data))
        data = None if rest is None else data + rest
    if not data:
        return None
    size = JOB_LENGTH.unpack_from(data)[0]
    if len(data) - 8 >= size:
        return memoryview(data)[8 : 8 + size]
    rest = read_exact(fd, size - (len(data) - 8))
    return None if rest is None else data[8:] + rest


PLANNED_RLIMITS = (
    resource.RLIMIT_AS,
    resource.RLIMIT_CPU,
    resource.RLIMIT_NPROC,
    resource.RLIMIT_NOFILE,
    resource.RLIMIT_FSIZE,
    resource.RLIMIT_CORE,
    resource.RLIMIT_MSGQUEUE,  # POSIX message queues would outlive the run
)


def child_job(job, blobs):
    """The job as the run's process reads it (``RunPlan``): one ``marshal`` record of its
    rlimits, its code or arguments, the files' names and sizes and the archive's size, then the
    files' contents and the workspace archive as they are. The run decodes the record in one C
    call: every object its own Python code made there would copy a page of the template for it."""
    files = [(name, blobs[index]) for name, index in job["files"].items()]
    index = job.get("archive")
    archive = blobs[index] if index is not None else b""
    code, argv = (None, tuple(job["argv"])) if job["kind"] == "exec" else (job["code"], None)
    sizes = tuple((name, len(content)) for name, content in files)
    record = marshal.dumps((tuple(rlimit_plan(job["enforced"])), code, argv, sizes, len(archive)))
    return [record, *[content for _, content in files], archive]


class RunPlan:
    """What the run's process needs of its job, read from ``child_job``'s bytes."""

    __slots__ = ("truncated", "rlimits", "code", "argv", "files", "archive")

    def __init__(self, data):
        self.truncated = data is None
        if data is None:
            return
        self.rlimits, self.code, self.argv, sizes, archive_size = marshal.loads(data)  # ignores the bytes after it
        self.files, self.archive = [], b""
        if sizes or archive_size:
            view = memoryview(data)
            offset = len(view) - sum(size for _, size in sizes) - archive_size
            for name, size in sizes:
                self.files.append((name, view[offset : offset + size]))
                offset += size
            self.archive = view[offset:]


HARD_LIMITS = ()  # this server's hard limit of each of PLANNED_RLIMITS, read at start (``read_hard_limits``)


def read_hard_limits():
    """Read once, before the template is forked: the server checks before each job that its
    limits are still those it started with, so a job's plan needs no calls of its own."""
    global HARD_LIMITS
    HARD_LIMITS = tuple(resource.getrlimit(which)[1] for which in PLANNED_RLIMITS)


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
    for current_hard, (soft, hard) in zip(HARD_LIMITS, wanted):
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


def prepare_python_runs():
    """Set up, once in the template, the interpreter state every Python run starts from as
    ``python -c`` would: a fresh ``__main__``, ``sys.argv``, stdio objects on descriptors 0-2
    (the run's pipes once it has them). No job shapes it, so each run finds it in its copy
    without writing those pages itself. (Not ``sys.path``'s working directory: the template's
    is the workspace, which holds the last run's files when it makes the next run's process, and
    it must never import from there.)"""
    sys.stdin, sys.stdout, sys.stderr = sys.__stdin__, sys.__stdout__, sys.__stderr__
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main
    sys.argv[:] = ["-c"]


def exec_python(code):
    main = sys.modules["__main__"]  # fresh: made by prepare_python_runs in the template
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


def on_sigint(signum, frame):
    """SIGINT in a run is KeyboardInterrupt, as in any Python; sent to this server (a run can
    signal its init because a handler is installed) it is ignored. One handler for both, so
    that no run pays for installing its own."""
    if os.getpid() != 1:
        raise KeyboardInterrupt
