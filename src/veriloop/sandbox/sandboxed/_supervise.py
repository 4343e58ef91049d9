"""The server's side of one run: feed it, cap its output, enforce its deadline, end every process
it left and classify its outcome (part of the server's script)."""

import math
import os
import select
import signal
import time

from veriloop.sandbox.sandboxed._frames import MIB  # sandbox: strip
from veriloop.sandbox.sandboxed._kernel import own_file  # sandbox: strip

MEMORY_WORDS = (b"MemoryError", b"std::bad_alloc", b"Cannot allocate memory", b"out of memory")


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


NS_LAST_PID = "/proc/sys/kernel/ns_last_pid"  # the pid this PID namespace allocated last


def nothing_made_since(pid):
    """Whether ``pid`` (the run's process, just reaped) is still the last process or thread
    made in this namespace: then none of the run's can be left, and no /proc scan is needed.
    (A pid is reused only after every other was allocated in turn, which no leftover process
    could do between the reaping and this read.) False where the file cannot be read."""
    try:
        return int(os.pread(own_file(NS_LAST_PID), 32, 0)) == pid
    except (OSError, ValueError):
        return False


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


PF_EXITING = 0x4
UNFIT_STATES = (b"Z", b"X", b"x", b"T", b"t")  # exited, or stopped (by a signal or a tracer)


def ended_or_ending(pid):
    """Whether ``pid`` (the template) can no longer be trusted to make the next run's process: it
    has exited, is exiting, is stopped, or has a signal pending. The template receives no signal
    in its work, and the seccomp guard denies every call that names it; a pending one came by a
    path the filter cannot see (a file whose I/O signals its owner, F_SETOWN and F_SETSIG), and a
    stop signal among them would leave it unable to answer the next job. Called once the run's
    processes are gone, so nothing can be sent to it after the check."""
    try:
        stat = os.pread(own_file("/proc/%d/stat" % pid), 4096, 0)
        status = os.pread(own_file("/proc/%d/status" % pid), 8192, 0)
    except OSError:
        return True
    fields = stat.rpartition(b")")[2].split()
    if fields[0] in UNFIT_STATES or int(fields[6]) & PF_EXITING:
        return True
    for line in status.split(b"\n"):
        if line.startswith((b"SigPnd:", b"ShdPnd:")) and int(line.split()[1], 16):
            return True
    return False
