"""The killable worker pool behind the math and reasoning-gym kinds, driven with stdlib targets."""

from __future__ import annotations

import os
import threading
import time

import pytest

from veriloop.verifiers import CheckTimeout, GraderError
from veriloop.verifiers.answers._check_pool import CheckPool, CheckProcessCrashed


@pytest.fixture
def sleeper():
    pool = CheckPool("time:sleep", size=2)
    yield pool
    pool.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not open(f"/proc/{pid}/stat").read().split(")")[1].split()[0] == "Z"


@pytest.mark.e2e
def test_a_call_past_its_deadline_is_killed_and_replaced(sleeper):
    sleeper.warm()
    before = set(sleeper.worker_pids())
    started = time.monotonic()
    with pytest.raises(CheckTimeout, match="longer than 0.5 s"):
        sleeper.call(30, timeout_s=0.5)
    assert time.monotonic() - started < 10
    assert sleeper.call(0, timeout_s=30) is None  # the pool still works
    killed = before - set(sleeper.worker_pids())
    assert killed and not any(_alive(pid) for pid in killed)


@pytest.mark.e2e
def test_timeouts_work_from_many_threads(sleeper):
    errors = []

    def run():
        try:
            sleeper.call(30, timeout_s=0.5)
        except CheckTimeout as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(errors) == 4


def test_an_exception_in_the_target_is_a_grader_error():
    pool = CheckPool("math:sqrt", size=1)
    try:
        assert pool.call(16, timeout_s=30) == 4.0
        with pytest.raises(GraderError, match="ValueError: math domain error"):
            pool.call(-1, timeout_s=30)
        assert pool.call(9, timeout_s=30) == 3.0
    finally:
        pool.close()


@pytest.mark.e2e
def test_a_worker_that_dies_is_a_grader_error_and_is_replaced():
    pool = CheckPool("os:_exit", size=1)
    try:
        with pytest.raises(CheckProcessCrashed):
            pool.call(3, timeout_s=30)
        with pytest.raises(CheckProcessCrashed):
            pool.call(3, timeout_s=30)
    finally:
        pool.close()


def test_an_unloadable_target_fails_clearly():
    pool = CheckPool("no_such_module_here:run", size=1)
    try:
        with pytest.raises(GraderError, match="cannot load no_such_module_here:run"):
            pool.call(1, timeout_s=30)
    finally:
        pool.close()


def test_close_stops_the_workers(sleeper):
    sleeper.warm()
    pids = sleeper.worker_pids()
    sleeper.close()
    assert not any(_alive(pid) for pid in pids)
    with pytest.raises(GraderError, match="closed"):
        sleeper.call(0, timeout_s=1)


@pytest.mark.e2e
def test_workers_die_with_their_parent():
    """A worker stuck in a check must not outlive a parent that was killed outright."""
    import signal
    import subprocess
    import sys

    code = (
        "from veriloop.verifiers.answers._check_pool import CheckPool\n"
        "pool = CheckPool('time:sleep', size=1)\n"
        "pool.warm()\n"
        "print(pool.worker_pids()[0], flush=True)\n"
        "pool.call(1000, timeout_s=1000)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        worker_pid = int(parent.stdout.readline())
        assert _alive(worker_pid)
        time.sleep(0.3)  # the worker is now inside the 1000 s call
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    deadline = time.monotonic() + 10
    while _alive(worker_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(worker_pid)


def test_set_check_workers_resizes_the_shared_pools():
    from veriloop.verifiers import set_check_workers
    from veriloop.verifiers.answers._check_pool import shared_pool

    try:
        set_check_workers(1)
        assert shared_pool("time:sleep").size == 1
        set_check_workers(3)
        assert shared_pool("time:sleep").size == 3
        with pytest.raises(ValueError):
            set_check_workers(0)
    finally:
        set_check_workers(None)
