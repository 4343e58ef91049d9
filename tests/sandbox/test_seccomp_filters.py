"""The seccomp filters, built for each architecture and read by a small classic-BPF interpreter.

Two filters: the one bubblewrap loads for the whole sandbox (``sandbox/_seccomp.py``) and the
guard the template loads on itself (``sandboxed/_guard.py``). Each is checked against the
system call numbers of ``asm/unistd.h`` for x86_64 and aarch64; on x86_64 the same calls are
then made for real inside a sandbox, and must come out as the interpreter says.
"""

from __future__ import annotations

import errno
import json
import platform
import re
import struct
from pathlib import Path

import pytest

import veriloop.sandbox as sandbox_package
from veriloop.sandbox._seccomp import _DENIED, ARCHITECTURES, seccomp_program
from veriloop.sandbox._shipped import module_source

ALLOW, KILL = "allow", "kill"
AUDIT = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7, "i386": 0x40000003, "arm": 0x40000028}
NUMBERS = {  # from asm/unistd_64.h (x86_64) and asm-generic/unistd.h (aarch64)
    "x86_64": {"getpid": 39, "shmget": 29, "keyctl": 250, "setpriority": 141, "sched_setaffinity": 203},
    "aarch64": {"getpid": 172, "shmget": 194, "keyctl": 219, "setpriority": 140, "sched_setaffinity": 122},
}
NUMBERS["x86_64"] |= {"ioprio_set": 251, "prlimit64": 302, "kill": 62, "tgkill": 234, "mount_setattr": 442}
NUMBERS["aarch64"] |= {"ioprio_set": 30, "prlimit64": 261, "kill": 129, "tgkill": 131, "mount_setattr": 442}


def verdict(program: bytes, arch: int, nr: int, args: tuple[int, ...] = ()) -> str | int:
    """What ``program`` answers for one call: ALLOW, KILL, or the errno it fails with."""
    data = struct.pack("=iIQ6Q", nr, arch, 0, *(list(args) + [0] * (6 - len(args))))
    ops = [struct.unpack_from("=HBBI", program, at) for at in range(0, len(program), 8)]
    accumulator, pc = 0, 0
    while True:
        code, jt, jf, k = ops[pc]
        pc += 1
        if code == 0x20:  # BPF_LD | BPF_W | BPF_ABS
            accumulator = struct.unpack_from("=I", data, k)[0]
        elif code in (0x15, 0x35):  # BPF_JMP | BPF_JEQ / BPF_JGE | BPF_K
            taken = accumulator == k if code == 0x15 else accumulator >= k
            pc += jt if taken else jf
        elif code == 0x06:  # BPF_RET | BPF_K
            action = k & 0xFFFF0000
            if action == 0x7FFF0000:
                return ALLOW
            if action == 0x00050000:
                return k & 0xFFFF
            assert action in (0x80000000, 0), hex(k)
            return KILL
        else:
            raise AssertionError(f"instruction {code:#x} the filters do not use")


def host_filter_cases() -> list[tuple[str, tuple[int, ...], str | int]]:
    """``(call, args, verdict)`` of the host filter: on the caller itself, allowed; on another
    process, denied; reading anyone's limits, allowed."""
    new_limit, old_limit = 0x7FFF0000, 0x7FFF1000
    return [
        ("getpid", (), ALLOW),
        ("shmget", (0, 4096, 0o600), errno.EPERM),
        ("keyctl", (0,), errno.EPERM),
        ("mount_setattr", (), errno.EPERM),
        ("setpriority", (0, 0, 5), ALLOW),
        ("setpriority", (0, 1, 5), errno.EPERM),
        ("setpriority", (2, 0, 5), errno.EPERM),  # PRIO_USER: every process of the uid
        ("sched_setaffinity", (0, 8, 0), ALLOW),
        ("sched_setaffinity", (1, 8, 0), errno.EPERM),
        ("ioprio_set", (1, 0, 0), ALLOW),
        ("ioprio_set", (1, 1, 0), errno.EPERM),
        ("prlimit64", (0, 7, new_limit, 0), ALLOW),
        ("prlimit64", (1, 7, 0, old_limit), ALLOW),
        ("prlimit64", (1, 7, new_limit, 0), errno.EPERM),
        ("prlimit64", (1, 7, 1 << 32, 0), errno.EPERM),  # a pointer is compared on both halves
    ]


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_host_filter_denies_what_it_names_on_each_architecture(machine):
    program = seccomp_program(machine)
    assert program is not None
    arch, numbers = AUDIT[machine], NUMBERS[machine]
    for call, args, expected in host_filter_cases():
        assert verdict(program, arch, numbers[call], args) == expected, (machine, call, args)
    for name in _DENIED:
        assert verdict(program, arch, ARCHITECTURES[machine].numbers[name]) == errno.EPERM, (machine, name)


HEADERS = {
    "x86_64": Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
    "aarch64": Path("/usr/include/asm-generic/unistd.h"),  # the generic table aarch64 uses
}


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_every_call_number_is_the_one_in_the_kernel_headers(machine):
    if not HEADERS[machine].exists():
        pytest.skip(f"no {HEADERS[machine]} here (linux-libc-dev)")
    defined = dict(re.findall(r"^#define __NR(?:3264)?_(\w+)\s+(\d+)", HEADERS[machine].read_text(), re.MULTILINE))
    guard = _guard_module()
    guarded = {**guard["GUARDED_CALLS"][machine], "pidfd_open": guard["PIDFD_OPEN"]}
    numbers = {**ARCHITECTURES[machine].numbers, **NUMBERS[machine], **guarded, "pidfd_send_signal": 424}
    assert {name: int(defined[name]) for name in numbers} == numbers


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_host_filter_kills_calls_of_another_architecture(machine):
    program = seccomp_program(machine)
    for other in ("i386", "arm", *(name for name in ARCHITECTURES if name != machine)):
        assert verdict(program, AUDIT[other], NUMBERS[machine]["getpid"]) == KILL, (machine, other)


def test_only_x86_64_denies_x32_calls():
    x32_getpid = 0x40000000 | NUMBERS["x86_64"]["getpid"]
    assert verdict(seccomp_program("x86_64"), AUDIT["x86_64"], x32_getpid) == errno.EPERM
    assert verdict(seccomp_program("aarch64"), AUDIT["aarch64"], NUMBERS["aarch64"]["getpid"]) == ALLOW


def test_no_filter_is_built_for_an_architecture_it_does_not_know():
    assert seccomp_program("riscv64") is None


def _guard_module() -> dict:
    """The namespace of the template's guard, run from the sandboxed module's own source."""
    namespace: dict = {}
    folder = Path(sandbox_package.__file__).parent / "sandboxed"
    exec(compile(module_source(folder, "_guard"), "_guard.py", "exec"), namespace)
    return namespace


def _guard_program(template_pid: int, machine: str) -> bytes | None:
    fprog = _guard_module()["guard_filter"](template_pid, machine)
    return None if fprog is None else fprog.program.raw[: fprog.len * 8]


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_template_guard_keeps_signals_from_the_template_on_each_architecture(machine):
    template = 7
    program = _guard_program(template, machine)
    arch, numbers = AUDIT[machine], NUMBERS[machine]
    for call in ("kill", "tgkill"):
        assert verdict(program, arch, numbers[call], (template, 9)) == errno.EPERM
        assert verdict(program, arch, numbers[call], (-template & 0xFFFFFFFF, 9)) == errno.EPERM
        assert verdict(program, arch, numbers[call], (0xFFFFFFFF, 9)) == errno.ESRCH  # -1: every process
        assert verdict(program, arch, numbers[call], (template + 1, 9)) == ALLOW
    assert verdict(program, arch, 424, (3, 9)) == errno.EPERM  # pidfd_send_signal
    assert verdict(program, arch, numbers["getpid"]) == ALLOW
    assert _guard_program(template, "riscv64") is None


REAL_CALLS = """
import ctypes, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
limits = (ctypes.c_uint64 * 2)(16, 16)
old = (ctypes.c_uint64 * 2)()
mask = ctypes.c_uint64(1)
pointers = {0x7FFF0000: ctypes.addressof(limits), 0x7FFF1000: ctypes.addressof(old), 1 << 32: 1 << 32}
outcomes = []
for number, args in json.loads(sys.argv[1]):
    args = [pointers.get(arg, arg) for arg in args]
    if number == %(affinity)d:
        args[2] = ctypes.addressof(mask)
    result = libc.syscall(number, *[ctypes.c_long(arg) for arg in args])
    outcomes.append("allow" if result >= 0 else ctypes.get_errno())
print(json.dumps(outcomes))
"""


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the calls are made with x86_64 numbers")
def test_the_x86_64_filters_answer_for_real_as_the_interpreter_says(sandbox):
    numbers = NUMBERS["x86_64"]
    cases = [case for case in host_filter_cases() if case[0] != "mount_setattr"]
    cases.append(("kill", (0xFFFFFFFF, 0), errno.ESRCH))  # the template's guard: a run seems alone
    calls = [
        [numbers[call], [arg - (1 << 32) if arg == 0xFFFFFFFF else arg for arg in args]] for call, args, _ in cases
    ]
    code = REAL_CALLS % {"affinity": numbers["sched_setaffinity"]}
    result = sandbox.run(["python3", "-c", code, json.dumps(calls)])
    assert result.status == "ok", result
    outcomes = json.loads(result.stdout)
    for (call, args, expected), outcome in zip(cases, outcomes, strict=True):
        if expected == ALLOW:
            assert outcome != errno.EPERM, (call, args, outcome)
        else:
            assert outcome == expected, (call, args, outcome)
