"""What the server, the template and every run share of the kernel: libc, a raw fork and clone,
capabilities, and the process settings a run must not change in another process.

Part of the sandbox server's script (``sandboxed/_server.py`` describes it; ``_bwrap.SERVER_MODULES``
lists the modules in the order they are joined).
"""

import ctypes
import os
import platform
import signal
import struct

libc = ctypes.CDLL(None, use_errno=True)
# fork(2) without CPython's at-fork bookkeeping, which copies ~200 pages per child. Safe here:
# this server has one thread and forks outside any import. Of the hooks the warm modules
# registered, random's reseed is done by the server before each fork (where it copies no
# pages); threading's only refreshes main_thread().native_id.
raw_fork = ctypes.PyDLL(None, use_errno=True).fork
raw_syscall = ctypes.PyDLL(None, use_errno=True).syscall
CLONE_PARENT = 0x8000
CLONE_SYSCALL = {"x86_64": 56, "aarch64": 220}.get(platform.machine())
CLONE_FLAGS = CLONE_PARENT | int(signal.SIGCHLD)  # made once: each clone then touches no signal module object
PR_SET_DUMPABLE = 4


def clone_parent():
    """A copy of this process that is a child of this process's parent (the server)."""
    if CLONE_SYSCALL is not None:
        return raw_syscall(CLONE_SYSCALL, CLONE_FLAGS, 0, 0, 0, 0)
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
    """Every capability of this process, gone. The ambient set goes with them: the kernel keeps
    no capability ambient that is not both permitted and inheritable (capabilities(7))."""
    if capset(CAP_HEADER, CAP_NONE):
        raise OSError(ctypes.get_errno(), "could not drop capabilities")


OWN_FILES = {}  # path -> a descriptor kept open, so a check costs a read, not an open


def own_file(path):
    """This process's own open descriptor of ``path`` (a /proc/self file). A forked process
    that calls this must first ``forget_own_files``: its parent's name the parent."""
    if path not in OWN_FILES:
        OWN_FILES[path] = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    return OWN_FILES[path]


def forget_own_files():
    for fd in OWN_FILES.values():
        os.close(fd)
    OWN_FILES.clear()


def process_settings():
    """What a process passes on to its children and a run could try to change in another:
    rlimits (every one, as ``/proc/self/limits`` lists them: one read rather than a call for
    each), nice value, scheduling policy, CPU affinity and OOM score."""
    oom = os.pread(own_file("/proc/self/oom_score_adj"), 64, 0)
    limits = os.pread(own_file("/proc/self/limits"), 4096, 0)
    return limits, os.getpriority(os.PRIO_PROCESS, 0), os.sched_getscheduler(0), os.sched_getaffinity(0), oom
