"""No run may see or shape another: two consecutive runs on one warm server are strangers.

Every test runs on a sandbox with one worker, so the attacking run and the run after it land on
the same server. Each checks that the later run finds nothing of the earlier one (its code,
stdin, files, outputs in its memory; changed limits, priorities, affinity, OOM score or sysctls;
sockets), and that the honest counterpart of each attack still works.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator

import pytest

from veriloop.sandbox import Limits, Sandbox, SandboxUnavailable

LIMITS = Limits(timeout_s=10, memory_mb=256, max_processes=16, max_open_files=64, disk_mb=8)

# Scans the run's own readable memory for markers of the shape vl-earlier-<12 hex>. The pattern
# holds no such marker itself, so every match comes from somewhere else.
MEMORY_SCAN = r"""
import json, re
found = set()
pattern = re.compile(rb"vl-earlier-[0-9a-f]{12}")
with open('/proc/self/maps') as maps, open('/proc/self/mem', 'rb', buffering=0) as mem:
    for line in maps:
        fields = line.split()
        if 'r' not in fields[1] or (len(fields) > 5 and fields[5] in ('[vvar]', '[vsyscall]', '[vvar_vclock]')):
            continue
        start, end = (int(part, 16) for part in fields[0].split('-'))
        try:
            mem.seek(start)
            chunk = mem.read(end - start)
        except (OSError, OverflowError, ValueError):
            continue
        found.update(match.decode() for match in pattern.findall(chunk))
print(json.dumps(sorted(found)))
"""


@pytest.fixture(scope="module")
def box() -> Iterator[Sandbox]:
    try:
        sandbox = Sandbox(limits=LIMITS, workers=1)
    except SandboxUnavailable as exc:
        pytest.skip(f"no sandbox on this machine: {exc}")
    with sandbox:
        yield sandbox


def _marker() -> str:
    return "vl-earlier-" + secrets.token_hex(6)


# ---- memory of earlier runs --------------------------------------------------------------


def test_a_run_finds_nothing_of_earlier_runs_in_its_memory(box):
    code, stdin, stdout, stderr, file = (_marker() for _ in range(5))
    earlier = box.run_python(
        f"import sys\nsecret = {code!r}\ndata = sys.stdin.read()\nprint({stdout!r})\n"
        f"print({stderr!r}, file=sys.stderr)\nprint(open('given.txt').read(), data)",
        stdin=stdin,
        files={"given.txt": file},
    )
    assert earlier.ok, earlier
    assert stdout in earlier.stdout and stdin in earlier.stdout and file in earlier.stdout
    for _ in range(3):  # later runs too: nothing accumulates in what runs are copied from
        later = box.run_python(MEMORY_SCAN)
        assert later.ok, later
        assert set(json.loads(later.stdout)).isdisjoint({code, stdin, stdout, stderr, file}), later.stdout


# Reads what it can of every other process it can see (the server passes jobs on; the template
# is copied): memory through its maps, command line, environment, open files' names.
OTHER_PROCESSES_SCAN = r"""
import json, os, re
pattern = re.compile(rb"vl-earlier-[0-9a-f]{12}")
found, seen = set(), []
for pid in (p for p in os.listdir('/proc') if p.isdigit() and int(p) != os.getpid()):
    seen.append(pid)
    texts = []
    for name in ('cmdline', 'environ', 'status', 'stat'):
        try:
            texts.append(open(f'/proc/{pid}/{name}', 'rb').read())
        except OSError:
            pass
    try:
        texts += [os.readlink(f'/proc/{pid}/fd/{fd}').encode() for fd in os.listdir(f'/proc/{pid}/fd')]
    except OSError:
        pass
    try:
        with open(f'/proc/{pid}/maps') as maps, open(f'/proc/{pid}/mem', 'rb', buffering=0) as mem:
            for line in maps:
                start, end = (int(part, 16) for part in line.split()[0].split('-'))
                try:
                    mem.seek(start)
                    texts.append(mem.read(end - start))
                except (OSError, OverflowError, ValueError):
                    pass
    except OSError:
        pass
    for text in texts:
        found.update(match.decode() for match in pattern.findall(text))
print(json.dumps({'seen': len(seen), 'found': sorted(found)}))
"""


def test_no_process_a_run_can_see_holds_anything_of_earlier_runs(box):
    markers = [_marker() for _ in range(3)]
    earlier = box.run_python(
        f"print({markers[0]!r})\nimport sys\nprint({markers[1]!r}, file=sys.stderr)", stdin=markers[2]
    )
    assert earlier.ok, earlier
    later = box.run_python(OTHER_PROCESSES_SCAN)
    assert later.ok, later
    scan = json.loads(later.stdout)
    assert scan["seen"] >= 1  # the server at least: the scan had somewhere to look
    assert scan["found"] == [], scan


def test_a_run_still_finds_its_own_data_in_its_memory(box):
    own = _marker()
    result = box.run_python(f"kept = {own!r}\n" + MEMORY_SCAN)
    assert result.ok, result
    assert own in json.loads(result.stdout)  # the scan works: it sees this run's own code


def test_a_run_cannot_end_the_process_runs_are_copied_from(box):
    attack = box.run_python(
        "import os, signal\nkilled = []\n"
        "for pid in sorted(int(p) for p in os.listdir('/proc') if p.isdigit()):\n"
        "    if pid not in (1, os.getpid()):\n"
        "        for target in (pid, -pid):\n"
        "            try:\n                os.kill(target, signal.SIGKILL); killed.append(target)\n"
        "            except OSError:\n                pass\n"
        "print(killed)"
    )
    assert attack.ok, attack
    assert attack.stdout.strip() == "[]"
    after = box.run_python("print('fine')")
    assert after.stdout == "fine\n" and not after.sandbox_replaced


SIGNAL_TO_THE_TEMPLATE = r"""
import fcntl, os, signal
template = min(int(p) for p in os.listdir('/proc') if p.isdigit() and int(p) not in (1, os.getpid()))
r, w = os.pipe()
fcntl.fcntl(r, fcntl.F_SETOWN, template)
fcntl.fcntl(r, 10, signal.%s)  # F_SETSIG: I/O on the pipe signals its owner, the template
fcntl.fcntl(r, fcntl.F_SETFL, os.O_ASYNC)
os.write(w, b'x')
"""


@pytest.mark.parametrize("name", ["SIGKILL", "SIGSTOP", "SIGINT", "SIGTERM", "SIGUSR1"])
def test_a_run_that_signals_the_template_another_way_gets_a_fresh_sandbox(box, name):
    # The seccomp filter cannot see every path a signal takes. A template that died, stopped
    # (it would answer no later job) or has a signal on its way is noticed once the run's
    # processes are gone, and the sandbox replaced, so that no later run is copied from anything
    # but a pristine template, nor waits for one that cannot answer.
    attack = box.run_python(SIGNAL_TO_THE_TEMPLATE % name)
    assert attack.sandbox_replaced and "template" in attack.detail, attack
    started = time.monotonic()
    after = box.run_python(MEMORY_SCAN)
    assert after.ok and not after.sandbox_replaced, after
    assert time.monotonic() - started < 2.0, "the next run waited for the stopped template"


def test_runs_start_with_no_signal_blocked(box):
    # The template blocks every signal (one a run sends it stays pending, for the server to see);
    # its copies must not pass that on to the program a run starts.
    python = box.run_python("print([l.split()[1] for l in open('/proc/self/status') if l.startswith('SigBlk')][0])")
    command = box.run(["grep", "SigBlk", "/proc/self/status"])
    assert python.stdout.strip() == "0000000000000000", python
    assert command.stdout.split() == ["SigBlk:", "0000000000000000"], command


# ---- shaping later runs: limits, priorities, affinity, OOM score, sysctls ------------------

SETTINGS_PROBE = r"""
import ctypes, json, os, resource
libc = ctypes.CDLL(None, use_errno=True)
def oom(pid):
    with open('/proc/%s/oom_score_adj' % pid) as handle:
        return handle.read().strip()
def sysctl(name):
    with open('/proc/sys/' + name) as handle:
        return handle.read().strip()
print(json.dumps({
    'limits': {name: resource.getrlimit(getattr(resource, name)) for name in sorted(dir(resource)) if name.startswith('RLIMIT_')},
    'nice': os.getpriority(os.PRIO_PROCESS, 0),
    'policy': os.sched_getscheduler(0),
    'affinity': sorted(os.sched_getaffinity(0)),
    'ioprio': libc.syscall(252, 1, 0),
    'oom': oom('self'),
    'sysctls': [sysctl(name) for name in ('kernel/shmmax', 'kernel/msgmax', 'fs/mqueue/msg_max', 'net/ipv4/ip_local_port_range')],
}))
"""

# Every way a run could shape the processes later runs are copied from (pid 1 is the server;
# the others are the template and this run's own parent chain), and write namespace-wide state.
SHAPING_ATTACK = r"""
import ctypes, os, resource
libc = ctypes.CDLL(None, use_errno=True)
changed = []
def attempt(what, call):
    try:
        if call() in (-1,):
            return
        changed.append(what)
    except OSError:
        pass
targets = [int(p) for p in os.listdir('/proc') if p.isdigit() and int(p) != os.getpid()]
for pid in targets:
    for name in ('RLIMIT_NOFILE', 'RLIMIT_AS', 'RLIMIT_FSIZE', 'RLIMIT_CPU', 'RLIMIT_NPROC'):
        which = getattr(resource, name)
        attempt('prlimit %s %d' % (name, pid), lambda: resource.prlimit(pid, which, (16, 16)))
    attempt('setpriority %d' % pid, lambda: os.setpriority(os.PRIO_PROCESS, pid, 19))
    attempt('setpriority pgrp %d' % pid, lambda: os.setpriority(os.PRIO_PGRP, pid, 19))
    attempt('affinity %d' % pid, lambda: os.sched_setaffinity(pid, {0}))
    attempt('scheduler %d' % pid, lambda: os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0)))
    attempt('ioprio %d' % pid, lambda: libc.syscall(251, 1, pid, (3 << 13) | 7))
attempt('setpriority user', lambda: os.setpriority(os.PRIO_USER, 0, 19))
attempt('ioprio user', lambda: libc.syscall(251, 3, 0, (3 << 13) | 7))
for path in ['/proc/%d/oom_score_adj' % pid for pid in targets + [os.getpid()]] + [
    '/proc/sys/kernel/shmmax', '/proc/sys/kernel/msgmax', '/proc/sys/fs/mqueue/msg_max',
    '/proc/sys/net/ipv4/ip_local_port_range',
]:
    def write(path=path):
        with open(path, 'w') as handle:
            handle.write('0' if 'oom' in path else '1')
    attempt('write ' + path, write)
print(changed)
"""


def test_a_run_cannot_shape_the_runs_after_it(box):
    before = box.run_python(SETTINGS_PROBE)
    assert before.ok, before
    attack = box.run_python(SHAPING_ATTACK)
    assert attack.ok, attack
    assert attack.stdout.strip() == "[]", attack.stdout
    after = box.run_python(SETTINGS_PROBE)
    assert after.ok, after
    assert json.loads(after.stdout) == json.loads(before.stdout)
    assert not after.sandbox_replaced


def test_a_run_may_still_lower_its_own_settings(box):
    # The nice value is checked as a rise from the run's own start (capped at 19), so the test
    # holds when pytest itself runs under nice.
    result = box.run_python(
        "import os, resource, subprocess\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (32, 32))\n"
        "before = os.getpriority(os.PRIO_PROCESS, 0)\n"
        "os.nice(5)\nos.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\n"
        "os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))\n"
        "raised = os.getpriority(os.PRIO_PROCESS, 0) - before == min(5, 19 - before)\n"
        "print(resource.getrlimit(resource.RLIMIT_NOFILE), raised,"
        " len(os.sched_getaffinity(0)), os.sched_getscheduler(0) == os.SCHED_BATCH)\n"
        "print(resource.prlimit(1, resource.RLIMIT_NOFILE) is not None)\n"
        "print(subprocess.run(['sh', '-c', 'ulimit -n 20 && nice -n 3 sh -c \"echo child\"'],"
        " capture_output=True, text=True).stdout.strip())"
    )
    assert result.ok, result
    assert result.stdout.split("\n")[:3] == ["(32, 32) True 1 True", "True", "child"]


# ---- the writable mounts: emptied when a run left anything, only looked at otherwise ------

MOUNTS = ("/workspace", "/tmp", "/dev/shm")
ROOTS = "import json, os\nprint(json.dumps({m: [sorted(os.listdir(m)), oct(os.stat(m).st_mode)] for m in %r}))" % (
    MOUNTS,
)
CHANGE_TIMES = "import json, os\nprint(json.dumps([os.stat(m).st_ctime_ns for m in %r]))" % (MOUNTS,)

# Every kind of entry a run can leave, each taking an inode: a file, an empty directory, a
# symlink, a hard link (its first name removed), a FIFO and a bound UNIX socket; and a run that
# leaves nothing but its mount's root changed in mode.
LEAVE_EACH_KIND = r"""
import os, socket
path = os.path.join(mount, 'left')
if kind == 'file':
    open(path, 'w').close()
elif kind == 'directory':
    os.mkdir(path)
elif kind == 'symlink':
    os.symlink('/nowhere', path)
elif kind == 'hard link':
    open(path + '0', 'w').close(); os.link(path + '0', path); os.unlink(path + '0')
elif kind == 'fifo':
    os.mkfifo(path)
elif kind == 'socket':
    socket.socket(socket.AF_UNIX).bind(path)
elif kind == 'mode':
    open(path, 'w').close(); os.unlink(path); os.chmod(mount, 0o700)
"""


@pytest.mark.parametrize("mount", MOUNTS)
@pytest.mark.parametrize("kind", ["file", "directory", "symlink", "hard link", "fifo", "socket", "mode"])
def test_whatever_a_run_leaves_in_a_mount_is_gone_for_the_next(box, kind, mount):
    clean = box.run_python(ROOTS)
    assert clean.ok, clean
    left = box.run_python(f"kind, mount = {kind!r}, {mount!r}\n" + LEAVE_EACH_KIND)
    assert left.ok, left
    after = box.run_python(ROOTS)
    assert json.loads(after.stdout) == json.loads(clean.stdout), (kind, mount)


def test_mounts_a_run_left_as_they_were_are_not_emptied_again(box):
    box.run_python("pass")
    first = box.run_python(CHANGE_TIMES)
    box.run_python("import os\nos.listdir('/tmp')\nprint(sum(range(10)))")
    second = box.run_python(CHANGE_TIMES)
    assert json.loads(first.stdout) == json.loads(second.stdout)  # no chmod: an emptied mount was only looked at
    box.run_python("open('/tmp/left', 'w').close()")
    third = box.run_python(CHANGE_TIMES)
    workspace, tmp, shm = json.loads(third.stdout)
    assert tmp != json.loads(second.stdout)[1]  # emptied, so its root's mode was set again
    assert (workspace, shm) == tuple(json.loads(second.stdout)[::2])


# ---- snapshots ---------------------------------------------------------------------------


def test_a_snapshot_of_sparse_files_is_refused_without_using_memory():
    limits = Limits(timeout_s=20, memory_mb=64, disk_mb=64, max_file_mb=64)
    with Sandbox(limits=limits, workers=1) as sandbox:
        result = sandbox.run_python(
            "import os\nfor name in ('a', 'b'):\n    os.truncate(os.open(name, os.O_CREAT | os.O_WRONLY), 48 << 20)\n",
            capture=True,
        )
        assert result.status == "ok", result
        assert result.snapshot is None and "too large to snapshot" in result.detail
        assert not result.sandbox_replaced
        assert sandbox.run_python("print('fine')").stdout == "fine\n"


def test_a_workspace_with_a_small_sparse_file_is_still_captured(box):
    result = box.run_python(
        "import os\nwith open('dense', 'wb') as f:\n    f.write(os.urandom(1 << 20))\n"
        "os.truncate(os.open('sparse', os.O_CREAT | os.O_WRONLY), 1 << 20)\n",
        capture=True,
    )
    assert result.ok and result.snapshot is not None, result
    restored = box.run_python(
        "import os\nprint(os.path.getsize('dense'), os.path.getsize('sparse'))", snapshot=result.snapshot
    )
    assert restored.stdout.strip() == f"{1 << 20} {1 << 20}"


def test_tmp_is_world_writable_and_sticky_from_the_first_run():
    with Sandbox(limits=LIMITS, workers=1) as sandbox:
        first = sandbox.run_python("import os\nprint(oct(os.stat('/tmp').st_mode & 0o7777))")
    assert first.stdout.strip() == "0o1777", first


# ---- network state that outlives a run ----------------------------------------------------

TIME_WAIT_ON_A_PORT = r"""
import socket
server = socket.socket()
server.bind(('127.0.0.1', 47011))
server.listen(1)
client = socket.create_connection(('127.0.0.1', 47011))
conn, _ = server.accept()
conn.close()  # the accepting side closes first: its end of the connection waits in TIME_WAIT
client.close()
server.close()
print(' '.join(open('/proc/net/sockstat').read().split('\n')[1].split()[5:7]))
"""

LOOPBACK_ROUND_TRIP = r"""
import socket
server = socket.socket()
server.bind(('127.0.0.1', 47011))
server.listen(1)
client = socket.create_connection(('127.0.0.1', 47011))
conn, _ = server.accept()
client.sendall(b'ping')
print(conn.recv(4).decode(), sorted(name for _, name in socket.if_nameindex()))
print(sum(1 for _ in open('/proc/net/tcp')) - 1, 'sockets')
"""


def test_sockets_left_by_a_run_do_not_reach_the_next_one(box):
    earlier = box.run_python(TIME_WAIT_ON_A_PORT)
    assert earlier.ok, earlier
    assert earlier.stdout.split() == ["tw", "1"]  # the attack did leave a TIME_WAIT socket
    later = box.run_python(LOOPBACK_ROUND_TRIP)  # binds the same port, without SO_REUSEADDR
    assert later.ok, later
    assert later.stdout.split("\n")[:2] == ["ping ['lo']", "3 sockets"]  # its listener and connection
    assert not later.sandbox_replaced


def test_runs_cannot_make_namespaces_or_keep_capabilities(box):
    result = box.run_python(
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "print(libc.unshare(0x40000000), ctypes.get_errno(), libc.unshare(0x10000000), ctypes.get_errno())\n"
        "caps = dict(line.split(':') for line in open('/proc/self/status') if line.startswith('Cap'))\n"
        "print(int(caps['CapEff'], 16), int(caps['CapPrm'], 16), int(caps['CapAmb'], 16))\n"
        "import subprocess\nprint(subprocess.run(['grep', 'CapEff', '/proc/self/status'], capture_output=True, text=True).stdout)"
    )
    assert result.ok, result
    lines = result.stdout.split("\n")
    network, network_errno, user, user_errno = map(int, lines[0].split())
    assert (network, network_errno) == (-1, 1)  # EPERM: no capability left to make one with
    assert user == -1 and user_errno in (1, 28)  # bubblewrap's --disable-userns: no user namespace at all
    assert lines[1] == "0 0 0"
    assert lines[2].split() == ["CapEff:", "0000000000000000"]
