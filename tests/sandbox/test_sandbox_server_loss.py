"""A warm server that dies or is left in a bad state costs the next run nothing; a server that
dies under a run makes that run ``killed``.

Servers are killed from the host, by pid, the way the out-of-memory killer or an operator
would. Whether a run ran, and ran once, is checked on the host: its result, and a scan of
/proc for the name the run gives its process.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from veriloop.core import ExecResult
from veriloop.sandbox import Limits, Sandbox, SandboxUnavailable

LIMITS = Limits(timeout_s=10, memory_mb=64, max_processes=16, disk_mb=4, output_bytes=16 * 1024)


@pytest.fixture
def lone() -> Iterator[Sandbox]:
    """A sandbox of one worker, so every run lands on the server the test kills."""
    try:
        box = Sandbox(limits=LIMITS, workers=1)
    except SandboxUnavailable as exc:
        pytest.skip(f"no sandbox on this machine: {exc}")
    with box:
        yield box


def server_pid(sandbox: Sandbox) -> int:
    """Host pid of the sandbox's server: the only child of its bubblewrap process."""
    [handle] = sandbox._backend._servers
    bwrap = handle._proc.pid
    [child] = Path(f"/proc/{bwrap}/task/{bwrap}/children").read_text().split()
    return int(child)


def wait_gone(pid: int) -> None:
    for _ in range(500):
        if not Path(f"/proc/{pid}").exists() or "State:\tZ" in Path(f"/proc/{pid}/status").read_text():
            return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} did not end")


def in_background(call) -> tuple[threading.Thread, list[ExecResult]]:
    results: list[ExecResult] = []
    thread = threading.Thread(target=lambda: results.append(call()))
    thread.start()
    return thread, results


def wait_for(predicate, seconds: float = 10.0) -> None:
    end = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < end, "timed out waiting"
        time.sleep(0.01)


def started_in_a_thread_that_ends(start):
    """``start()`` run in a thread of its own, which has ended when this returns."""
    made = []
    thread = threading.Thread(target=lambda: made.append(start()))
    thread.start()
    thread.join()
    return made[0]


@pytest.mark.e2e
def test_a_sandbox_started_in_a_thread_that_has_ended_keeps_its_server():
    # Bubblewrap dies with the thread that started it (--die-with-parent): a sandbox started
    # early, from a short-lived thread, must still serve its first run on the same server.
    try:
        box = started_in_a_thread_that_ends(lambda: Sandbox(limits=LIMITS, workers=1))
    except SandboxUnavailable as exc:
        pytest.skip(f"no sandbox on this machine: {exc}")
    with box:
        [handle] = box._backend._servers
        bubblewrap = handle._proc
        time.sleep(0.2)
        assert bubblewrap.poll() is None, f"the server ended with its starting thread ({bubblewrap.returncode})"
        result = box.run_python("print('up')")
        assert (result.status, result.stdout, result.sandbox_replaced) == ("ok", "up\n", False), result.detail
        assert handle._proc is bubblewrap


@pytest.mark.e2e
def test_a_server_replaced_from_a_thread_that_has_ended_keeps_serving(lone):
    # A run on a pool's thread finds its server dead and starts a fresh one; that thread then
    # ends (the pool is shut down): the fresh server must serve the next run.
    os.kill(server_pid(lone), signal.SIGKILL)
    [handle] = lone._backend._servers
    wait_for(lambda: handle._proc.poll() is not None)
    first = started_in_a_thread_that_ends(lambda: lone.run_python("print('fresh')"))
    assert (first.status, first.stdout) == ("ok", "fresh\n"), first.detail
    bubblewrap = handle._proc
    time.sleep(0.2)
    assert bubblewrap.poll() is None, f"the fresh server ended with its starting thread ({bubblewrap.returncode})"
    result = lone.run_python("print('still')")
    assert (result.status, result.stdout) == ("ok", "still\n"), result.detail
    assert handle._proc is bubblewrap


@pytest.mark.e2e
@pytest.mark.parametrize("pause_s", [0.0, 0.002, 0.3])
def test_a_run_right_after_its_idle_server_was_killed_runs_normally(lone, pause_s):
    for attempt in range(4):
        assert lone.run_python("print('warm')").stdout == "warm\n"
        os.kill(server_pid(lone), signal.SIGKILL)
        time.sleep(pause_s)
        result = lone.run_python(f"print('after {attempt}')")
        assert (result.status, result.stdout) == ("ok", f"after {attempt}\n"), result.detail
        assert result.sandbox_replaced is False


def test_a_run_after_the_idle_servers_helper_was_killed_runs_normally(lone):
    """A process the idle server keeps (the template runs are copied from) that died is found
    before the next job is sent, so that job goes to a fresh server."""
    lone.run_python("pass")
    server = server_pid(lone)
    helpers = Path(f"/proc/{server}/task/{server}/children").read_text().split()
    if not helpers:
        pytest.skip("this server keeps no helper process between runs")
    for helper in helpers:
        os.kill(int(helper), signal.SIGKILL)
        wait_gone(int(helper))
    result = lone.run_python("print('after')")
    assert (result.status, result.stdout) == ("ok", "after\n"), result.detail
    assert result.sandbox_replaced is False


def template_pid(sandbox: Sandbox) -> int:
    """Host pid of the template runs are copied from (the server's oldest child)."""
    [handle] = sandbox._backend._servers
    if handle._at_rest is None or handle._at_rest._blind:
        pytest.skip("this host cannot tell the sandbox's processes apart")
    server = server_pid(sandbox)
    [template] = [pid for pid in handle._at_rest._seen if pid != server]
    return template


@pytest.mark.e2e
@pytest.mark.parametrize("blind", [False, True])
def test_a_run_after_the_idle_template_was_stopped_runs_normally_and_soon(lone, blind):
    """A stopped template would answer no request. The host sees it stopped before it sends the
    next job; a host that cannot read the sandbox's processes (``blind``) relies on the server,
    which finds it stopped after the run it already made a process for, and gives up on it within
    ``ANSWER_WAIT_S`` when it has none: either way the job runs, on a fresh server if need be."""
    for attempt in range(2):
        lone.run_python("pass")
        template = template_pid(lone)
        if blind:
            [handle] = lone._backend._servers
            handle._at_rest._blind = True
        os.kill(template, signal.SIGSTOP)
        started = time.monotonic()
        result = lone.run_python(f"print('after {attempt}')")
        assert (result.status, result.stdout) == ("ok", f"after {attempt}\n"), result.detail
        assert time.monotonic() - started < 4.0
        second = lone.run_python("print('then')")
        assert (second.status, second.stdout) == ("ok", "then\n"), second.detail


@pytest.mark.e2e
def test_a_template_that_does_not_answer_is_given_up_on_within_its_wait():
    """The server's wait for the next run's process is bounded: a stopped template yields None
    (the job never started) after ``ANSWER_WAIT_S``, not a wait as long as the run's deadline."""
    from veriloop.sandbox.sandboxed import _template

    control = [fd for pair in (os.pipe(), os.pipe()) for fd in pair]
    template = _template.Template(tuple(control[:3]))
    pipes = [os.pipe() for _ in range(_template.SPAWN_FDS)]
    try:
        os.kill(template.pid, signal.SIGSTOP)
        assert template.request([read for read, _ in pipes])
        started = time.monotonic()
        assert template.answer() is None
        waited = time.monotonic() - started
        assert _template.ANSWER_WAIT_S - 0.1 <= waited < _template.ANSWER_WAIT_S + 2.0
    finally:
        os.kill(template.pid, signal.SIGKILL)
        os.waitpid(template.pid, 0)
        template.requests.close()
        for fd in [*control, *(fd for pair in pipes for fd in pair)]:
            os.close(fd)


def test_a_run_whose_ready_process_was_killed_while_idle_runs_normally(lone):
    """The process the template made ready for the next run, killed between runs: the server
    finds it gone when it hands on the job, which never started and goes to a fresh server."""
    for attempt in range(3):
        lone.run_python("pass")
        server = server_pid(lone)
        [handle] = lone._backend._servers
        if handle._at_rest is None or handle._at_rest._blind:
            pytest.skip("this host cannot tell the sandbox's processes apart")
        watched = set(handle._at_rest._seen)
        children = Path(f"/proc/{server}/task/{server}/children")
        wait_for(lambda children=children: len(children.read_text().split()) == 2)
        helpers = children.read_text().split()
        [ready] = [int(pid) for pid in helpers if int(pid) not in watched]
        os.kill(ready, signal.SIGKILL)
        wait_gone(ready)
        result = lone.run_python(f"print('after {attempt}')")
        assert (result.status, result.stdout) == ("ok", f"after {attempt}\n"), result.detail
        assert result.sandbox_replaced is False


def test_a_run_after_its_idle_server_was_stopped_runs_normally_and_soon(lone):
    """A stopped server would read no job: the host sees it stopped and replaces it first."""
    lone.run_python("pass")
    [handle] = lone._backend._servers
    if handle._at_rest is None or handle._at_rest._blind:
        pytest.skip("this host cannot read the sandbox's processes")
    server = server_pid(lone)
    os.kill(server, signal.SIGSTOP)
    wait_for(lambda: "State:\tT" in Path(f"/proc/{server}/status").read_text())
    started = time.monotonic()
    result = lone.run_python("print('after')")
    assert (result.status, result.stdout) == ("ok", "after\n"), result.detail
    assert time.monotonic() - started < 4.0


def test_a_job_its_server_died_without_reading_goes_to_a_fresh_server(lone):
    """The job is already in the dead server's pipe: it never started, so it runs elsewhere."""
    lone.run_python("pass")
    pid = server_pid(lone)
    [handle] = lone._backend._servers
    if handle._at_rest is not None:
        handle._at_rest._blind = True  # a host that sees a stopped server replaces it before sending
    os.kill(pid, signal.SIGSTOP)  # alive to the handle's other checks, but reads nothing
    thread, results = in_background(lambda: lone.run_python("print(6 * 7)"))
    time.sleep(0.5)  # the job now waits in the pipe
    os.kill(pid, signal.SIGKILL)
    thread.join(timeout=30)
    [result] = results
    assert (result.status, result.stdout) == ("ok", "42\n"), result.detail
    assert result.sandbox_replaced is False


def test_a_run_whose_server_is_killed_under_it_is_killed_and_not_run_again(lone, marker, leftovers):
    """A run that started may have had effects: it is reported, never silently repeated."""
    code = f"import ctypes, time\nctypes.CDLL(None).prctl(15, b'{marker}', 0, 0, 0)\ntime.sleep(6)\nprint('finished')"
    thread, results = in_background(lambda: lone.run_python(code))
    wait_for(lambda: leftovers(marker))
    os.kill(server_pid(lone), signal.SIGKILL)
    killed_at = time.monotonic()
    thread.join(timeout=30)
    [result] = results
    assert (result.status, result.exit_code, result.stdout) == ("killed", None, "")
    assert result.sandbox_replaced
    assert time.monotonic() - killed_at < 5  # not run a second time, which would take its 6 s again
    time.sleep(0.5)
    assert leftovers(marker) == []
    assert lone.run_python("print('next')").stdout == "next\n"  # the next run gets a healthy server


def test_a_server_that_said_more_than_it_was_asked_is_replaced_before_the_next_run(lone):
    """Bytes in the answer pipe between runs would be read as the next run's answer."""
    lone.run_python("pass")
    [handle] = lone._backend._servers
    forged = {"status": "ok", "exit_code": 0, "stdout": base64.b64encode(b"forged\n").decode(), "stderr": ""}
    forged |= {"wall_s": 0.0, "cpu_s": 0.0, "detail": "", "snapshot": None, "restart": False}
    data = json.dumps(forged).encode()
    with open(f"/proc/{handle._proc.pid}/fd/1", "wb") as answers:  # bubblewrap holds the server's answer pipe
        answers.write(struct.pack(">I", len(data)) + data)
    for expected in ("real\n", "again\n"):
        result = lone.run_python(f"print({expected.strip()!r})")
        assert (result.status, result.stdout) == ("ok", expected)


def test_bytes_read_along_with_an_answer_get_the_server_replaced_before_the_next_run(lone):
    """The host reads what the pipe holds, so bytes a server wrote right after its answer can
    arrive in the same read: kept apart, they still count as the server saying too much."""
    lone.run_python("pass")
    [handle] = lone._backend._servers
    first = handle._proc.pid
    handle._ahead += b"S"  # as if read together with the last answer
    result = lone.run_python("print('real')")
    assert (result.status, result.stdout) == ("ok", "real\n")
    assert handle._proc.pid != first and not handle._ahead


SETTINGS = "import os, resource\nprint(os.getpriority(os.PRIO_PROCESS, 0), sorted(os.sched_getaffinity(0)), resource.getrlimit(resource.RLIMIT_NOFILE), os.sched_getscheduler(0))"
SHAPE_THE_SERVER = {
    "nice": "os.setpriority(os.PRIO_PROCESS, 1, 19)",
    "affinity": "os.sched_setaffinity(1, {min(os.sched_getaffinity(0))})",
    "rlimit": "resource.prlimit(1, resource.RLIMIT_NOFILE, (20, 20))",
    "policy": "os.sched_setscheduler(1, os.SCHED_IDLE, os.sched_param(0))",
}


@pytest.mark.parametrize("setting", sorted(SHAPE_THE_SERVER))
def test_a_run_that_changed_its_servers_settings_leaves_the_next_run_the_defaults(lone, setting):
    """Runs inherit what the process they come from has: a changed one is replaced first."""
    defaults = lone.run_python(SETTINGS).stdout
    attempt = f"import os, resource\ntry:\n    {SHAPE_THE_SERVER[setting]}\nexcept OSError:\n    pass"
    lone.run_python(attempt)
    assert lone.run_python(SETTINGS).stdout == defaults


def test_a_run_that_changed_only_its_own_settings_costs_no_new_server(lone):
    defaults = lone.run_python(SETTINGS).stdout
    pid = server_pid(lone)
    own = "import os, resource\nos.nice(10)\nresource.setrlimit(resource.RLIMIT_NOFILE, (20, 20))\n"
    assert lone.run_python(own + "os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})").ok
    assert lone.run_python(SETTINGS).stdout == defaults
    assert server_pid(lone) == pid


def _memory_cgroup(pid: int) -> Path | None:
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            group = Path("/sys/fs/cgroup/memory") / path.lstrip("/")
            return group if group.name.startswith("veriloop-sandbox-") else None
    return None


def _oom_kills(group: Path) -> int:
    fields = dict(line.split() for line in (group / "memory.oom_control").read_text().splitlines())
    return int(fields.get("oom_kill", 0))


@pytest.mark.e2e
def test_an_idle_server_the_oom_killer_took_costs_the_next_run_nothing(lone):
    """The kill is counted in the sandbox's memory cgroup, but it was no run's doing."""
    lone.run_python("pass")
    pid = server_pid(lone)
    group = _memory_cgroup(pid)
    if group is None:
        pytest.skip("no memory cgroup per sandbox here (needs root and cgroup v1)")
    before = _oom_kills(group)
    limit = int((group / "memory.limit_in_bytes").read_text())
    hog = "import sys; open(sys.argv[1], 'w').write('0'); chunk = bytearray(int(sys.argv[2]))"  # joins, then floods
    subprocess.run([sys.executable, "-c", hog, str(group / "cgroup.procs"), str(limit + (64 << 20))], check=False)
    wait_gone(pid)  # the out-of-memory killer's first choice: the server, oom_score_adj 1000
    assert _oom_kills(group) > before
    result = lone.run_python("print('innocent')")
    assert (result.status, result.stdout, result.detail) == ("ok", "innocent\n", "")
    flood = lone.run_python(FLOOD, limits=LIMITS.model_copy(update={"memory_mb": 128}))
    assert flood.status == "memory_limit"  # while a kill during a run is still the run's


FLOOD = """
import os, time
for _ in range(8):  # each under its own address-space limit, together over the sandbox's cap
    if os.fork() == 0:
        chunk = bytearray(40 << 20)
        time.sleep(1)
        os._exit(0)
for _ in range(8):
    os.wait()
"""


def _faulty_server(monkeypatch, before: str, fault: str) -> None:
    """Sandboxes started from now on run a server that does ``fault`` on its second job, at
    the line ``before`` (faults injected into the real server; everything else is as shipped)."""
    import veriloop.sandbox._bwrap as bwrap

    source = bwrap.SERVER_SOURCE
    assert before in source
    indent = before[: len(before) - len(before.lstrip())]
    count = f"{indent}run_job.calls = getattr(run_job, 'calls', 0) + 1\n"  # both places are in run_job
    injected = f"{count}{indent}if run_job.calls == 2:\n{indent}    {fault}\n{before}"
    monkeypatch.setattr(bwrap, "SERVER_SOURCE", source.replace(before, injected, 1))


@pytest.mark.parametrize(
    ("before", "fault"),
    [
        # the server read the whole job, then died before handing it to the run's process
        ("        parts = child_job(job, blobs)", "os._exit(1)"),
        # the template could not make the run's process: the server answers that it never started
        ("    pid = child.pid()\n    if pid is None:", "child.asked = False"),
    ],
    ids=["died-before-handing-on", "no-process-for-the-run"],
)
def test_a_job_that_never_started_runs_on_a_fresh_server_as_if_nothing_happened(monkeypatch, before, fault):
    _faulty_server(monkeypatch, before, fault)
    with Sandbox(limits=LIMITS, workers=1) as box:
        assert box.run_python("print('first')").stdout == "first\n"
        second = box.run_python("print('second')")  # the fault: this job never reached a run
        assert (second.status, second.stdout, second.sandbox_replaced) == ("ok", "second\n", False), second
        assert box.run_python("print('third')").stdout == "third\n"


def test_an_answer_without_its_start_byte_is_not_trusted(monkeypatch):
    """The start byte travels on a pipe of its own, read with the answer: an answer that came
    without it is out of turn, so the run is reported killed and the server replaced."""
    _faulty_server(
        monkeypatch, "    write_all(STARTS_OUT, STARTED)", "globals()['STARTS_OUT'] = os.open(os.devnull, os.O_WRONLY)"
    )
    with Sandbox(limits=LIMITS, workers=1) as box:
        assert box.run_python("print('first')").stdout == "first\n"
        second = box.run_python("print('second')")
        assert (second.status, second.stdout, second.sandbox_replaced) == ("killed", "", True), second
        assert "out of turn" in second.detail
        assert box.run_python("print('third')").stdout == "third\n"
