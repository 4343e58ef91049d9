"""A seccomp filter for sandboxes: deny the system calls a run never needs and could abuse.

Denied (EPERM): kernel keyrings and SysV IPC objects (both would outlive a run: they belong
to the uid or the namespace, not the process), reading or writing other processes' memory
(ptrace, process_vm_*), the large kernel attack surfaces (perf_event_open, bpf, userfaultfd, io_uring), and namespace, mount,
module and reboot calls (no sandbox process has the capabilities for them anyway). A 32-bit
system call kills the process and x32 ones are denied, so the filter cannot be sidestepped.

Built for x86_64 only; elsewhere ``seccomp_program()`` returns None and sandboxes run
without it (the other layers still hold).
"""

from __future__ import annotations

import platform
import struct

_AUDIT_ARCH_X86_64 = 0xC000003E
_X32_SYSCALL_BIT = 0x40000000
_DENIED_X86_64 = {
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
    "unshare": 272,
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
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
}

_LD_ABS_W = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_RET_K = 0x06
_RET_KILL_PROCESS = 0x80000000
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO_EPERM = 0x00050000 | 1


def _instruction(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def seccomp_program() -> bytes | None:
    """The classic-BPF program (``struct sock_filter[]``) bubblewrap loads with --seccomp."""
    if platform.machine() != "x86_64":
        return None
    numbers = sorted(_DENIED_X86_64.values())
    deny_at = 5 + len(numbers) + 1  # index of the EPERM return
    program = [
        _instruction(_LD_ABS_W, 0, 0, 4),  # seccomp_data.arch
        _instruction(_JEQ_K, 1, 0, _AUDIT_ARCH_X86_64),
        _instruction(_RET_K, 0, 0, _RET_KILL_PROCESS),
        _instruction(_LD_ABS_W, 0, 0, 0),  # seccomp_data.nr
        _instruction(_JGE_K, deny_at - 5, 0, _X32_SYSCALL_BIT),
    ]
    for index, number in enumerate(numbers, start=5):
        program.append(_instruction(_JEQ_K, deny_at - (index + 1), 0, number))
    program.append(_instruction(_RET_K, 0, 0, _RET_ALLOW))
    program.append(_instruction(_RET_K, 0, 0, _RET_ERRNO_EPERM))
    return b"".join(program)
