"""A seccomp filter for sandboxes: deny the system calls a run never needs and could abuse.

Denied (EPERM): kernel keyrings and SysV IPC objects (both would outlive a run: they belong
to the uid or the namespace, not the process), reading or writing other processes' memory
(ptrace, process_vm_*), the large kernel attack surfaces (perf_event_open, bpf, userfaultfd, io_uring), and namespace, mount
(the new mount API included), module and reboot calls. ``unshare`` is the exception: the template
of a sandbox without network (``sandboxed/_template.py``) makes network namespaces with it, and runs
are denied it by a filter of their own, loaded before their code starts. A 32-bit
system call (any architecture but the sandbox's own: 32-bit x86 or ARM) kills the process, and
x32 ones are denied, so the filter cannot be sidestepped.

Also denied (EPERM): changing another process's resource limits, nice value, scheduling policy,
CPU affinity or I/O priority. A process may change its own (pid or who 0) and read anyone's
limits (``prlimit64`` without a new limit), but the sandbox server and the template every run is
copied from are out of reach: what a run set there would hold for every later run.

Built for x86_64 and aarch64 (``ARCHITECTURES``); elsewhere ``seccomp_program()`` returns None
and sandboxes run without it (the other layers still hold).
"""

from __future__ import annotations

import platform
import struct
from dataclasses import dataclass

_X32_SYSCALL_BIT = 0x40000000
_DENIED = (
    "shmget",
    "semget",
    "msgget",
    "ptrace",
    "pivot_root",
    "acct",
    "mount",
    "umount2",
    "swapon",
    "swapoff",
    "reboot",
    "init_module",
    "delete_module",
    "kexec_load",
    "add_key",
    "request_key",
    "keyctl",
    "perf_event_open",
    "name_to_handle_at",
    "open_by_handle_at",
    "setns",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "finit_module",
    "kexec_file_load",
    "bpf",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
)

# Calls allowed only on the caller itself: {name: ((argument, value it must have), ...)}.
# setpriority and ioprio_set name a kind of target first (PRIO_PROCESS is 0, IOPRIO_WHO_PROCESS 1).
_SELF_ONLY = {
    "setpriority": ((0, 0), (1, 0)),
    "sched_setparam": ((0, 0),),
    "sched_setscheduler": ((0, 0),),
    "sched_setaffinity": ((0, 0),),
    "ioprio_set": ((0, 1), (1, 0)),
    "sched_setattr": ((0, 0),),
}
# prlimit64 is allowed on the caller itself (pid 0), or on anyone without a new limit (a read).


@dataclass(frozen=True)
class Architecture:
    """What the filter needs to know of one architecture: its audit number (``AUDIT_ARCH_*``),
    whether it has x32 calls (numbers with ``_X32_SYSCALL_BIT`` set, to deny), and the number
    of each call the filter names (``asm/unistd.h``)."""

    audit: int
    x32: bool
    numbers: dict[str, int]


# Calls numbered from 424 on have one number on every architecture.
_UNIFIED = {
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "mount_setattr": 442,
}
_X86_64 = {  # asm/unistd_64.h
    "shmget": 29,
    "semget": 64,
    "msgget": 68,
    "ptrace": 101,
    "pivot_root": 155,
    "acct": 163,
    "mount": 165,
    "umount2": 166,
    "swapon": 167,
    "swapoff": 168,
    "reboot": 169,
    "init_module": 175,
    "delete_module": 176,
    "kexec_load": 246,
    "add_key": 248,
    "request_key": 249,
    "keyctl": 250,
    "perf_event_open": 298,
    "name_to_handle_at": 303,
    "open_by_handle_at": 304,
    "setns": 308,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "kcmp": 312,
    "finit_module": 313,
    "kexec_file_load": 320,
    "bpf": 321,
    "userfaultfd": 323,
    "setpriority": 141,
    "sched_setparam": 142,
    "sched_setscheduler": 144,
    "sched_setaffinity": 203,
    "ioprio_set": 251,
    "sched_setattr": 314,
    "prlimit64": 302,
}
_AARCH64 = {  # asm-generic/unistd.h, the table aarch64 uses
    "shmget": 194,
    "semget": 190,
    "msgget": 186,
    "ptrace": 117,
    "pivot_root": 41,
    "acct": 89,
    "mount": 40,
    "umount2": 39,
    "swapon": 224,
    "swapoff": 225,
    "reboot": 142,
    "init_module": 105,
    "delete_module": 106,
    "kexec_load": 104,
    "add_key": 217,
    "request_key": 218,
    "keyctl": 219,
    "perf_event_open": 241,
    "name_to_handle_at": 264,
    "open_by_handle_at": 265,
    "setns": 268,
    "process_vm_readv": 270,
    "process_vm_writev": 271,
    "kcmp": 272,
    "finit_module": 273,
    "kexec_file_load": 294,
    "bpf": 280,
    "userfaultfd": 282,
    "setpriority": 140,
    "sched_setparam": 118,
    "sched_setscheduler": 119,
    "sched_setaffinity": 122,
    "ioprio_set": 30,
    "sched_setattr": 274,
    "prlimit64": 261,
}
ARCHITECTURES = {
    "x86_64": Architecture(audit=0xC000003E, x32=True, numbers={**_X86_64, **_UNIFIED}),
    "aarch64": Architecture(audit=0xC00000B7, x32=False, numbers={**_AARCH64, **_UNIFIED}),
}
"""The architectures the filter is built for, by ``platform.machine()`` name."""

_LD_ABS_W = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_RET_K = 0x06
_RET_KILL_PROCESS = 0x80000000
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO_EPERM = 0x00050000 | 1
_NR, _ARCH, _ARGS = 0, 4, 16  # offsets in struct seccomp_data; each argument is 8 bytes, low half first


def _instruction(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def _argument_is(index: int, value: int, *, full: bool = False) -> list[tuple]:
    """Jump to "next" (fall through) when args[index] equals ``value``, else to "deny".

    An int argument is compared on its low half (the kernel ignores the high one); a pointer
    (``full``) on both."""
    checks = [(_LD_ABS_W, None, None, _ARGS + 8 * index), (_JEQ_K, None, "deny", value)]
    if full:
        checks += [(_LD_ABS_W, None, None, _ARGS + 8 * index + 4), (_JEQ_K, None, "deny", 0)]
    return checks


def _assemble(blocks: list[tuple[str | None, list[tuple]]]) -> bytes:
    """Resolve labels: each op is (code, jump-if-true, jump-if-false, k), a jump being None (the next
    instruction) or a label; blocks are (label or None, ops)."""
    ops, labels = [], {}
    for label, block in blocks:
        if label is not None:
            labels[label] = len(ops)
        ops += block

    def offset(at: int, target: str | None) -> int:
        return 0 if target is None else labels[target] - at - 1

    return b"".join(_instruction(code, offset(at, jt), offset(at, jf), k) for at, (code, jt, jf, k) in enumerate(ops))


def seccomp_program(machine: str | None = None) -> bytes | None:
    """The classic-BPF program (``struct sock_filter[]``) bubblewrap loads with --seccomp, for
    ``machine`` (default: this one's); None for an architecture not in ``ARCHITECTURES``."""
    arch = ARCHITECTURES.get(machine or platform.machine())
    if arch is None:
        return None
    number = arch.numbers
    head = [(_LD_ABS_W, None, None, _ARCH), (_JEQ_K, None, "kill", arch.audit), (_LD_ABS_W, None, None, _NR)]
    if arch.x32:
        head.append((_JGE_K, "deny", None, _X32_SYSCALL_BIT))
    head += [(_JEQ_K, "deny", None, value) for value in sorted(number[name] for name in _DENIED)]
    head += [(_JEQ_K, name, None, number[name]) for name in _SELF_ONLY]
    head += [(_JEQ_K, "prlimit64", None, number["prlimit64"]), (_RET_K, None, None, _RET_ALLOW)]
    blocks: list[tuple[str | None, list[tuple]]] = [(None, head)]
    for name, wanted in _SELF_ONLY.items():
        checks = [op for index, value in wanted for op in _argument_is(index, value)]
        blocks.append((name, [*checks, (_RET_K, None, None, _RET_ALLOW)]))
    prlimit = [
        (_LD_ABS_W, None, None, _ARGS),
        (_JEQ_K, "allow", None, 0),  # pid 0: the caller
        *_argument_is(2, 0, full=True),  # new_limit NULL: only reads the limits
    ]
    blocks.append(("prlimit64", prlimit))
    blocks.append(("allow", [(_RET_K, None, None, _RET_ALLOW)]))
    blocks.append(("deny", [(_RET_K, None, None, _RET_ERRNO_EPERM)]))
    blocks.append(("kill", [(_RET_K, None, None, _RET_KILL_PROCESS)]))
    return _assemble(blocks)
