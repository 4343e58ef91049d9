"""The template: the process every run is a copy of, which never reads job data, and the server's
handle on it (part of the server's script)."""

import ctypes
import fcntl
import os
import re
import signal
import socket
import struct
import sys

from veriloop.sandbox.sandboxed._guard import guard_filter  # sandbox: strip
from veriloop.sandbox.sandboxed._kernel import OWN_FILES, clone_parent, libc, own_file  # sandbox: strip
from veriloop.sandbox.sandboxed._kernel import forget_own_files  # sandbox: strip
from veriloop.sandbox.sandboxed._kernel import process_settings, raw_fork  # sandbox: strip
from veriloop.sandbox.sandboxed._run import child_main, prepare_python_runs  # sandbox: strip

ANSWER_WAIT_S = 2.0  # a template answers in milliseconds; far less than a run's deadline grace on the host
SPAWN_FDS = 5  # the descriptors the server hands the template for a child: job, stdin, stdout, stderr, report
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
CAP_SYS_ADMIN = 21
CLONE_NEWNET = 0x40000000
SIOCSIFFLAGS, IFF_UP, IFF_RUNNING = 0x8914, 0x1, 0x40
SOCKET_TABLE = "/proc/self/net/sockstat"  # counts sockets of every family, TIME_WAIT and orphans included
# This namespace's own counters in it: sockets in use (of every family, orphaned TCP ones included)
# and TIME_WAIT ones. (The table's alloc, orphan and mem figures count every namespace.)
OWN_SOCKET_COUNTS = re.compile(rb"\b(?:used|inuse|tw) (\d+)")
SPAWN_FD_BLOCK = struct.Struct("=%di" % SPAWN_FDS)
PID_ANSWER = struct.Struct("=i")
RIGHTS = (socket.SOL_SOCKET, socket.SCM_RIGHTS)  # the level and type of passed descriptors


def may_make_networks():
    """Whether this process holds CAP_SYS_ADMIN (in the sandbox's user namespace): given by
    bubblewrap to sandboxes without network access, so that the template can renew its own."""
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> CAP_SYS_ADMIN & 1)
    return False


def socket_counts():
    """This network namespace's own socket counters (``OWN_SOCKET_COUNTS``). They differ from a
    fresh namespace's when a run left a socket behind."""
    return OWN_SOCKET_COUNTS.findall(os.pread(own_file(SOCKET_TABLE), 1 << 16, 0))


def received_fds(ancillary):
    """The descriptors passed in a message's ancillary data (``recvmsg``), in order."""
    if len(ancillary) == 1 and ancillary[0][:2] == RIGHTS and len(ancillary[0][2]) == SPAWN_FD_BLOCK.size:
        return SPAWN_FD_BLOCK.unpack(ancillary[0][2])  # the usual message: unpacked with a struct made once
    fds = []
    for level, kind, data in ancillary:
        if (level, kind) == RIGHTS:
            fds += struct.unpack("=%di" % (len(data) // 4), data[: len(data) // 4 * 4])
    return fds


def fresh_network():
    """Move this process into a new network namespace with only ``lo``, up (as bubblewrap
    leaves the sandbox's). The old one goes with its last process, and its sockets with it."""
    if libc.unshare(CLONE_NEWNET):
        raise OSError(ctypes.get_errno(), "could not make a network namespace")
    os.close(OWN_FILES.pop(SOCKET_TABLE))  # it shows the old namespace's sockets
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        fcntl.ioctl(probe, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", IFF_UP | IFF_RUNNING))


def template_main(requests, settings):
    """Serve copies of this process until the server goes. Each request carries only the
    descriptors the copy will use; the template never reads job data, so it never holds any.
    Before a copy, a network namespace a run left sockets in (TIME_WAIT ones outlive every
    process) is replaced, so that each run starts from a network as fresh as its files.

    Every signal that can be blocked is: one a run sends it (through a file's I/O owner, a path
    the seccomp guard cannot see) stays pending, where the server sees it once the run is gone,
    rather than running a handler in the template while the server looks."""
    signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    forget_own_files()  # the server's /proc/self files
    guard = guard_filter(os.getpid())
    if guard is not None and libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(guard), 0, 0):
        os._exit(1)  # the server finds its template gone and the host replaces the sandbox
    prepare_python_runs()
    renew = may_make_networks()
    clean = socket_counts()
    space = socket.CMSG_SPACE(SPAWN_FD_BLOCK.size)
    reseed = sys.modules["_random"].Random.seed  # as random.seed() does, without its Python frame
    generator = sys.modules["random"]._inst
    generator.gauss_next = None  # what random.seed() also resets; the template never draws, so it stays so
    while True:
        try:
            message, ancillary, _, _ = requests.recvmsg(16, space)
        except OSError:
            os._exit(0)
        fds = received_fds(ancillary)
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
            reseed(generator, None)  # each run gets its own random state, as a new process would
            pid = clone_parent()
            if pid == 0:
                requests.detach()
                child_main(fds)
        for fd in fds:
            os.close(fd)
        requests.send(PID_ANSWER.pack(pid))


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
                    os.dup2(null, fd)  # the host's pipes are the server's alone (and keep their descriptors taken)
                os.close(null)
                template_main(theirs, settings)
            finally:
                os._exit(0)
        theirs.close()
        wait = struct.pack("ll", int(ANSWER_WAIT_S), int(ANSWER_WAIT_S % 1 * 1e6))  # struct timeval
        self.requests.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, wait)
        self.pid = pid

    def request(self, fds):
        """Ask for a run's process holding ``fds``; False if the template is gone."""
        try:
            socket.send_fds(self.requests, [b"c"], fds)
        except OSError:
            return False
        return True

    def answer(self):
        """The pid of the process last requested, or None if the template could not make it or
        has not answered within ``ANSWER_WAIT_S`` (stopped, say: then the job never started,
        and the host runs it on a fresh sandbox rather than wait out the run's deadline)."""
        try:
            answer = self.requests.recv(4)  # OSError (EAGAIN) past the SO_RCVTIMEO set at start
        except OSError:
            return None
        pid = PID_ANSWER.unpack(answer)[0] if len(answer) == PID_ANSWER.size else -1
        return pid if pid > 0 else None
