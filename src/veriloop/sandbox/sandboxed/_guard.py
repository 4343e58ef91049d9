"""The seccomp guard the template loads on itself (and every run inherits): no signal reaches the
template (part of the server's script)."""

import ctypes
import errno
import platform
import struct

GUARDED_CALLS = {  # by architecture: the calls that send a signal to the process named by their first argument
    "x86_64": {"kill": 62, "rt_sigqueueinfo": 129, "tkill": 200, "tgkill": 234, "rt_tgsigqueueinfo": 297},
    "aarch64": {"kill": 129, "rt_sigqueueinfo": 138, "tkill": 130, "tgkill": 131, "rt_tgsigqueueinfo": 240},
}
PIDFD_OPEN = 434  # numbers from 424 on are the same on every architecture
PIDFD_SEND_SIGNAL = 424  # takes a pidfd, or a /proc/PID directory, whose target a filter cannot see


def guard_filter(template_pid, machine=None):
    """A seccomp program (``struct sock_fprog``) the template loads on itself, and so every run
    it clones inherits: no signal reaches the template (EPERM), and ``kill(-1)`` (every process
    but init and the caller) answers ESRCH as if the run were alone, since the only others it
    could reach are its own. (Namespaces a run cannot make: it holds no capability, and
    bubblewrap allows no user namespace.) For ``machine`` (default: this one's); None for one
    not in ``GUARDED_CALLS``."""
    calls = GUARDED_CALLS.get(machine or platform.machine())
    if calls is None:
        return None
    ld, jeq, ret = 0x20, 0x15, 0x06
    allow, eperm, esrch = 0x7FFF0000, 0x00050000 | errno.EPERM, 0x00050000 | errno.ESRCH
    numbers = sorted([*calls.values(), PIDFD_OPEN])
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
