"""Isolated check pools: a scorer that evaluates model text cannot reach the host or the next check.

The pool's target here is ``builtins:eval`` itself, the worst scorer there is: whatever an
answer does is checked from the host side (files, sockets, processes), and the check after
each attack must behave as if the attack never happened.
"""

from __future__ import annotations

import os
import socket
import threading
import time

import pytest

from veriloop.verifiers import CheckTimeout, GraderError
from veriloop.sandbox._isolated_process import kept_in_tmp
from veriloop.verifiers.answers._check_pool import SCORER_MAX_PROCESSES as MAX_PROCESSES
from veriloop.verifiers.answers._check_pool import CheckProcessCrashed, CheckPool

# Top-level names a checkout or venv under /tmp leaves in the box's private /tmp (read-only, kept).
_KEPT = sorted({root.split("/")[2] for root in kept_in_tmp()})


@pytest.fixture(scope="module")
def evaluator():
    pool = CheckPool("builtins:eval", size=1, isolated=True)
    yield pool
    pool.close()


def test_an_answer_cannot_write_host_files(evaluator, tmp_path):
    source = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
    targets = [tmp_path / "planted.txt", os.path.join(source, "src", "veriloop", "planted.py")]
    for target in targets:
        with pytest.raises(GraderError, match="Error"):
            evaluator.call(f"open({str(target)!r}, 'w').write('owned')", timeout_s=30)
        assert not os.path.exists(target)
    assert evaluator.call("len(__import__('os').listdir('/tmp'))", timeout_s=30) == len(_KEPT)


def test_files_left_in_the_private_tmp_do_not_reach_the_next_check(evaluator):
    for place in ("/", "/dev/shm", "/usr", os.path.dirname(os.__file__)):
        with pytest.raises(GraderError, match="Error"):
            evaluator.call(f"open({place + '/left-behind'!r}, 'w').write('for the next check')", timeout_s=30)
    plant = (
        "(lambda os: (open('/tmp/left-behind', 'w').write('x'), os.makedirs('/tmp/locked/deep'),"
        " open('/tmp/locked/deep/f', 'w').write('x'), os.chmod('/tmp/locked/deep', 0), os.chmod('/tmp/locked', 0),"
        " os.symlink('/tmp/locked', '/tmp/link'), sorted(os.listdir('/tmp')))[-1])(__import__('os'))"
    )
    assert evaluator.call(plant, timeout_s=30) == sorted(["left-behind", "link", "locked", *_KEPT])
    assert sorted(evaluator.call("__import__('os').listdir('/tmp')", timeout_s=30)) == _KEPT


def test_an_answer_sees_no_host_files(evaluator):
    assert evaluator.call("__import__('os').path.exists('/root/.bash_history')", timeout_s=30) is False
    assert evaluator.call("__import__('os').path.exists('/work/main/tests')", timeout_s=30) is False
    seen = set(evaluator.call("sorted(__import__('os').environ)", timeout_s=30))
    # Only what the box sets, bubblewrap's PWD, and what importing veriloop sets for itself.
    box = {"PATH", "HOME", "TMPDIR", "LANG", "PYTHONDONTWRITEBYTECODE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"}
    assert seen <= box | {
        "MKL_NUM_THREADS",
        "VERILOOP_SCRATCH_DIRS",
        "VERILOOP_SCRATCH_KEEP",
        "PWD",
        "MKL_CBWR",
        "VERILOOP_PLUGINS",
    }


def test_an_answer_cannot_open_a_socket(evaluator):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.1)
    port = listener.getsockname()[1]
    with pytest.raises(GraderError, match="Error"):
        evaluator.call(f"__import__('socket').create_connection(('127.0.0.1', {port}), timeout=2)", timeout_s=30)
    with pytest.raises(socket.timeout):
        listener.accept()
    listener.close()


def test_patched_builtins_and_modules_do_not_reach_the_next_check(evaluator):
    evaluator.call("__import__('builtins').__dict__.__setitem__('len', lambda value: 99)", timeout_s=30)
    with pytest.raises(GraderError, match="without a reply"):  # it broke only its own reply
        evaluator.call("setattr(__import__('json'), 'dumps', lambda *a, **k: '1.0')", timeout_s=30)
    evaluator.call("__import__('sys').modules.__setitem__('math', None)", timeout_s=30)
    assert evaluator.call("len('ab')", timeout_s=30) == 2
    assert evaluator.call("__import__('math').sqrt(4)", timeout_s=30) == 2.0
    assert evaluator.call("[1, 'x']", timeout_s=30) == [1, "x"]


def test_processes_an_answer_starts_are_gone_before_the_next_check(evaluator):
    spawn = (
        "[__import__('os').fork() or (__import__('os').setsid(), __import__('time').sleep(60)) for _ in range(3)] and 0"
    )
    evaluator.call(spawn, timeout_s=30)
    running = "sorted(int(p) for p in __import__('os').listdir('/proc') if p.isdigit())"
    pids = evaluator.call(running, timeout_s=30)
    assert len(pids) == 2 and pids[0] == 1  # the template and the child that asked


def test_the_template_memory_cannot_be_read(evaluator):
    for path in ("/proc/1/mem", "/proc/1/environ", "/proc/1/fd/0"):
        with pytest.raises(GraderError, match="Error"):
            evaluator.call(f"open({path!r}, 'rb').read(1)", timeout_s=30)


def test_a_forged_reply_line_is_the_childs_own_value_only(evaluator):
    # Writing to the template's stdout is impossible: the child has no such descriptor.
    forged = "__import__('os').write(1, b'{\"ok\": true, \"value\": 1.0}\\n') and 'honest'"
    assert evaluator.call(forged, timeout_s=30) == "honest"
    assert evaluator.call("'next'", timeout_s=30) == "next"


def _host_processes(marker: bytes) -> set[int]:
    """Host pids whose command line contains ``marker`` (the box's processes, seen from outside)."""
    found = set()
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and marker in open(f"/proc/{entry}/cmdline", "rb").read():
                found.add(int(entry))
        except OSError:
            pass
    return found


def test_a_check_past_its_deadline_is_stopped_and_the_pool_recovers(evaluator):
    evaluator.call("0", timeout_s=30)
    before = _host_processes(b"builtins:eval")
    started = time.monotonic()
    with pytest.raises(CheckTimeout):
        evaluator.call("[__import__('os').fork() for _ in range(3)] and __import__('time').sleep(60)", timeout_s=1)
    assert time.monotonic() - started < 30
    assert evaluator.call("1 + 1", timeout_s=60) == 2
    deadline = time.monotonic() + 10
    while before & _host_processes(b"builtins:eval") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert before and not before & _host_processes(b"builtins:eval")  # the old box and all it ran are gone


COUNTED_FORKS = """
import os, time
made, error = 0, None
try:
    for _ in range(4 * MAX_PROCESSES):
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        made += 1
except OSError as exc:
    error = str(exc)
"""
ENDLESS_FORKS = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"


def _run(source: str, result: str = "None") -> str:
    """An answer that runs ``source`` (statements) and evaluates to ``result`` in its namespace."""
    return (
        f"(lambda scope: (exec({source!r}, scope), eval({result!r}, scope))[1])({{'MAX_PROCESSES': {MAX_PROCESSES}}})"
    )


def test_an_answer_cannot_start_more_processes_than_its_box_holds(evaluator):
    made, error = evaluator.call(_run(COUNTED_FORKS, "[made, error]"), timeout_s=30)
    assert made < MAX_PROCESSES and "Resource temporarily unavailable" in error
    assert evaluator.call("__import__('resource').getrlimit(__import__('resource').RLIMIT_NPROC)", timeout_s=30) == [
        MAX_PROCESSES,
        MAX_PROCESSES,
    ]  # the cap an unprivileged host relies on; as root the box's pids cgroup holds it
    assert evaluator.call("1 + 1", timeout_s=30) == 2


@pytest.mark.e2e
def test_a_fork_bomb_ends_within_its_time_limit_and_the_host_and_next_check_are_unharmed(evaluator):
    evaluator.call("0", timeout_s=30)
    most, done = 0, threading.Event()

    def watch() -> None:
        nonlocal most
        while not done.is_set():
            most = max(most, len(_host_processes(b"builtins:eval")))
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    started = time.monotonic()
    try:
        with pytest.raises(CheckTimeout):
            evaluator.call(_run(ENDLESS_FORKS), timeout_s=3)
    finally:
        done.set()
        watcher.join()
    assert time.monotonic() - started < 15
    assert 2 <= most <= MAX_PROCESSES + 1, most  # the box (bubblewrap and what runs in it), never more
    assert evaluator.call("1 + 1", timeout_s=60) == 2


def test_a_box_that_cannot_start_is_a_crash_not_an_answer():
    pool = CheckPool("no_such_module_here:run", size=1, isolated=True)
    try:
        with pytest.raises(CheckProcessCrashed, match="cannot load"):
            pool.call(1, timeout_s=30)
    finally:
        pool.close()


def test_isolated_checks_from_many_threads():
    pool = CheckPool("builtins:eval", size=2, isolated=True)
    results = []
    try:

        def run(value):
            results.append(pool.call(f"{value} * 2", timeout_s=60))

        threads = [threading.Thread(target=run, args=(i,)) for i in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
    finally:
        pool.close()
    assert sorted(results) == [0, 2, 4, 6, 8, 10]
