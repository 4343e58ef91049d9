"""The host's handle on one sandbox: the bubblewrap'd server process (``sandboxed/_server.py``).

The handle sends the server each job with the limits it must enforce, computed here once per
run (``enforced_limits``), and reads its answer. The host never trusts the server with its own
safety: every answer has a deadline (the run's wall limit plus a grace) and a size bound (the
output caps plus the snapshot bound), and a server that misses either, dies, or says it could
not clean up is killed with its whole PID namespace and replaced before the next job.

A server that dies while idle (by design the out-of-memory killer's first choice) must not cost
the next run anything. Before each job the handle checks that the server still lives, has left
nothing unread in its answer pipe (bytes there would be taken for the next run's answer), and
that it and any helper it keeps (the template runs are copied from) still run with the rlimits,
OOM score, nice value, scheduling policy and CPU affinity they had when first seen idle (the
next run would inherit them); otherwise it is replaced first. The server writes one byte the
moment it has handed the job to the run's process (``S``), or instead of that, for a job no
process could be made for (``U``), on a pipe of its own that the handle reads only with the
answer or once the server is lost (so no run wakes the host for it). A server lost before
its ``S`` never started the run, and
neither did one that answered ``U``: the job goes to a fresh server, once, and the result is as
if nothing had happened. A server lost after its ``S`` may have started the run, so the run is
``killed``: it is never run twice. Out-of-memory kills are counted from the moment
the job is sent, so a kill between runs is no run's ``memory_limit``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import select
import signal
import struct
import subprocess
import termios
import threading
import time

from veriloop.core import ExecResult, Snapshot
from veriloop.sandbox._backend import SandboxUnavailable
from veriloop.sandbox._bwrap import HOST_ENV, Launch
from veriloop.sandbox._cgroup import MemoryCap
from veriloop.sandbox._job import Job
from veriloop.sandbox._lasting_thread import in_lasting_thread
from veriloop.sandbox._limits import MIB, EnforcedLimits, Limits, enforced_limits

_READY_TIMEOUT_S = 30.0
_GRACE_S = 5.0
_END_WAIT_S = 1.0  # an idle server told to end does so in milliseconds
_BYTES_PER_S = 20 * MIB  # allowance for moving files in and out of the sandbox
_STDERR_TAIL = 4096
_MAX_HEADER = 64 * 1024  # an answer's JSON header: status, codes, times, detail
_READ_AHEAD = 64 * 1024  # a pipe's buffer: what one read of an answer may find there
_STARTED, _UNSERVED = b"S", b"U"  # the byte before an answer (see sandboxed/_server.py)


class _Lost(Exception):
    """The server broke the protocol; ``status`` says how the run is reported."""

    def __init__(self, status: str, detail: str):
        super().__init__(detail)
        self.status = status


class _NeverStarted(_Lost):
    """The server died before it had the whole job, so the run cannot have started."""

    def __init__(self, detail: str):
        super().__init__("killed", detail)


def max_reply_bytes(enforced: EnforcedLimits, capture: bool) -> int:
    """The largest answer a server may send for a run: its outputs, its snapshot, a header."""
    snapshot = enforced.snapshot_bytes if capture else 0
    return 2 * enforced.output_bytes + snapshot + _MAX_HEADER


def _wait(fd: int, events: int, deadline: float) -> None:
    poller = select.poll()
    poller.register(fd, events)
    remaining = deadline - time.monotonic()
    if remaining <= 0 or not poller.poll(remaining * 1000):
        raise _Lost("timeout", "the sandbox stopped answering; it was replaced")


def _unread_bytes(fd: int) -> int:
    """Bytes written to the pipe ``fd`` (either end) that no reader has taken yet."""
    return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0" * 4))[0]


def job_frame(job: Job, enforced: EnforcedLimits) -> list[bytes]:
    """The frame the server reads (``read_frame`` in sandboxed/_frames.py): a JSON header
    naming each blob by its index, then the blobs (archive, files, stdin) as raw bytes."""
    blobs: list[bytes] = []

    def blob(data: bytes) -> int:
        blobs.append(data)
        return len(blobs) - 1

    header = {
        "kind": job.kind,
        "code": job.code,
        "argv": list(job.argv),
        "capture": job.capture,
        "enforced": enforced.model_dump(mode="json"),
        "archive": blob(job.snapshot.archive) if job.snapshot is not None else None,
        "files": {name: blob(content) for name, content in job.files.items()},
        "stdin": blob(job.stdin),
    }
    data = json.dumps({**header, "blobs": [len(b) for b in blobs]}).encode()
    return [struct.pack(">I", len(data)) + data, *blobs]


def result_from_reply(reply: dict, blobs: list[bytes]) -> ExecResult:
    """The ExecResult a server's answer describes (ValueError, KeyError or TypeError if malformed)."""
    stdout, stderr, *rest = blobs
    if bool(reply["snapshot"]) != bool(rest) or len(rest) > 1:
        raise ValueError("its snapshot flag does not match what it sent")
    return ExecResult(
        status=reply["status"],
        exit_code=reply["exit_code"],
        stdout=stdout.decode("utf-8", errors="replace"),
        stderr=stderr.decode("utf-8", errors="replace"),
        wall_s=max(0.0, float(reply["wall_s"])),
        cpu_s=reply["cpu_s"],
        detail=reply["detail"],
        snapshot=Snapshot(archive=rest[0]) if rest else None,
    )


def _child_of(pid: int) -> int | None:
    """The only child of ``pid`` (bubblewrap's namespace init), or None if it has none."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as handle:
            children = handle.read().split()
    except OSError:
        return None
    return int(children[0]) if len(children) == 1 else None


class _AtRest:
    """The processes of an idle sandbox (its server, and the template its runs are copied from)
    and the settings each had when the host first saw it idle, which the next run would inherit:
    rlimits, OOM score, nice value, scheduling policy and CPU affinity. Their /proc files stay
    open, so the check before each job is a few reads, not path lookups. The process the server
    keeps ready for the next run is not watched: the template makes it after the last run's
    processes are gone and after checking its own settings, and a server that finds it dead
    answers that the job never started."""

    def __init__(self, init_pid: int, helper_pids: list[int]):
        self._seen: dict[int, tuple[tuple[int, ...], tuple]] = {}  # pid -> (its open /proc files, settings)
        self._blind = False  # set when this host may not read them: the server's own checks are all there is
        try:
            for pid in (init_pid, *helper_pids):
                files = self._open(pid)
                self._seen[pid] = (files, _settings(pid, files))
        except PermissionError:
            self._blind = True

    def unchanged(self) -> bool:
        """Whether each process still runs with the settings it was first seen with."""
        if self._blind:
            return True
        try:
            return all(_settings(pid, files) == settings for pid, (files, settings) in self._seen.items())
        except OSError:  # a process of the idle sandbox ended
            return False

    @staticmethod
    def _open(pid: int) -> tuple[int, ...]:
        files: list[int] = []
        try:
            for name in ("stat", "limits", "oom_score_adj"):
                files.append(os.open(f"/proc/{pid}/{name}", os.O_RDONLY | os.O_CLOEXEC))
        except OSError:
            for fd in files:
                os.close(fd)
            raise
        return tuple(files)

    def close(self) -> None:
        for files, _ in self._seen.values():
            for fd in files:
                os.close(fd)
        self._seen.clear()


def _helpers(init_pid: int, namespace_pids: list[int]) -> list[int]:
    """Host pids of the children of ``init_pid`` whose pid in the sandbox's namespace is one of
    ``namespace_pids`` (what the server's hello names: its template)."""
    with open(f"/proc/{init_pid}/task/{init_pid}/children") as handle:
        children = [int(pid) for pid in handle.read().split()]
    found = []
    for pid in children:
        with open(f"/proc/{pid}/status") as handle:
            inner = next((line.split()[-1] for line in handle if line.startswith("NSpid:")), None)
        if inner is not None and int(inner) in namespace_pids:
            found.append(pid)
    if len(found) != len(namespace_pids):
        raise OSError(f"the sandbox's helper processes {namespace_pids} were not found")
    return found


_UNFIT_STATES = (b"Z", b"X", b"T", b"t")  # ended, or stopped (it would answer no job)
_STAT_STATE, _STAT_NICE, _STAT_RT_PRIORITY, _STAT_POLICY = 0, 16, 37, 38  # fields of /proc/PID/stat after the name


def _settings(pid: int, files: tuple[int, ...]) -> tuple:
    """``pid``'s settings, read through its open /proc files (OSError once it has ended, as a
    zombie too, or is stopped: the open files also keep a reused pid from passing for it). Its nice
    value and scheduling policy and priority come with its state, in ``stat``."""
    stat, limits, oom = files
    fields = os.pread(stat, 4096, 0).rpartition(b")")[2].split()
    if fields[_STAT_STATE] in _UNFIT_STATES:
        raise ProcessLookupError(pid)
    scheduling = (fields[_STAT_NICE], fields[_STAT_RT_PRIORITY], fields[_STAT_POLICY], os.sched_getaffinity(pid))
    return os.pread(limits, 4096, 0), os.pread(oom, 64, 0), scheduling


class ServerHandle:
    """A sandbox server process and the pipes to it. Not thread-safe: one job at a time."""

    def __init__(self, launch: Launch, limits: Limits):
        self._launch = launch
        self._cap = MemoryCap.create(launch.run_as)
        if self._cap is not None:
            self._cap.fit(limits)
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr_tail = bytearray()
        self._ahead = bytearray()  # bytes of the server's answers read but not yet taken
        self._starts: int | None = None  # the pipe of the byte before each answer (S or U)
        self._drainer: threading.Thread | None = None
        self._init_pidfd: int | None = None  # the sandbox's PID-namespace init
        self._bwrap_pidfd: int | None = None
        self._idle_poll: select.poll | None = None  # readable while the idle sandbox is not ready (_is_ready)
        self._at_rest: _AtRest | None = None
        self._shut = False

    def spawn(self) -> None:
        """Start the server process (returns at once; ``wait_ready`` waits for it)."""
        fds: list[int] = []
        starts, starts_w = os.pipe()
        os.set_blocking(starts, False)
        try:
            for _, _, content in self._launch.data:
                read_end, write_end = os.pipe()
                os.write(write_end, content)
                os.close(write_end)
                fds.append(read_end)
            uid = self._launch.run_as
            drop = {} if uid is None else {"user": uid, "group": uid, "extra_groups": []}
            argv = self._launch.argv(fds, last=(str(starts_w),))
            if self._cap is not None:  # join the memory cgroup first, so every process starts in it
                argv = ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', self._cap.join_file, *argv]
            self._proc = in_lasting_thread(  # bubblewrap dies with the thread that starts it
                lambda: subprocess.Popen(
                    argv,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    env=HOST_ENV,
                    cwd="/",
                    pass_fds=[*fds, starts_w],
                    bufsize=0,
                    start_new_session=True,
                    **drop,
                )
            )
        except BaseException:
            os.close(starts)
            raise
        finally:
            for fd in [*fds, starts_w]:
                os.close(fd)
        self._starts = starts
        self._stderr_tail = bytearray()
        self._ahead = bytearray()
        self._drainer = threading.Thread(target=self._drain_stderr, args=(self._proc,), daemon=True)
        self._drainer.start()

    def _drain_stderr(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            self._stderr_tail = (self._stderr_tail + line)[-_STDERR_TAIL:]

    def wait_ready(self) -> None:
        """Wait for the server's hello; raise SandboxUnavailable with bubblewrap's complaint."""
        try:
            hello, _ = self._receive(time.monotonic() + _READY_TIMEOUT_S, 4096)
        except _Lost as exc:
            self.close()
            if self._drainer is not None:
                self._drainer.join(timeout=2)
            complaint = self._stderr_tail.decode(errors="replace").strip() or str(exc)
            raise SandboxUnavailable(f"the sandbox did not start: {complaint}") from None
        assert self._proc is not None
        init_pid = _child_of(self._proc.pid)
        self._init_pidfd = os.pidfd_open(init_pid) if init_pid else None
        self._bwrap_pidfd = os.pidfd_open(self._proc.pid)
        assert self._proc.stdout is not None and self._starts is not None
        self._idle_poll = select.poll()
        for fd in (self._proc.stdout.fileno(), self._starts, self._bwrap_pidfd, self._init_pidfd):
            if fd is not None:
                self._idle_poll.register(fd, select.POLLIN)
        try:
            self._at_rest = _AtRest(init_pid, _helpers(init_pid, hello.get("helpers", []))) if init_pid else None
        except OSError:  # /proc without children files: the server's own checks are all there is
            self._at_rest = None

    def _is_ready(self) -> bool:
        """Whether the server and its bubblewrap parent still run, and the server has said
        nothing since its last answer (bytes waiting there would be read as the next run's).
        One poll tells: a pipe with bytes in it or no writer left, or the pidfd of a process
        that ended, polls readable."""
        if self._proc is None or self._idle_poll is None or self._ahead or self._idle_poll.poll(0):
            return False
        return self._at_rest is None or self._at_rest.unchanged()

    def _send(self, frame: list[bytes], deadline: float) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None or proc.stdin.closed:
            raise _Lost("killed", "the sandbox was closed")
        fd = proc.stdin.fileno()
        for part in frame:
            view = memoryview(part)
            while view:
                _wait(fd, select.POLLOUT, deadline)
                try:
                    view = view[os.write(fd, view[: 1 << 20]) :]
                except BrokenPipeError:  # no reader left: the server died before it had the whole job
                    raise _NeverStarted("the sandbox died before it read the job") from None

    def _job_left_unread(self, proc: subprocess.Popen[bytes]) -> bool:
        """Whether the server is dead with part of the last job still in its pipe.

        Only a dead server's pipe says anything final: once the namespace's init has exited,
        every process that could read the job is gone.
        """
        pidfd = self._init_pidfd
        try:
            if pidfd is not None:
                if not select.select([pidfd], [], [], _GRACE_S)[0]:
                    return False
            else:
                proc.wait(timeout=_GRACE_S)
            return proc.stdin is not None and _unread_bytes(proc.stdin.fileno()) > 0
        except (OSError, ValueError, subprocess.TimeoutExpired):  # still running, or closed under us
            return False

    def _read_exact(self, fd: int, size: int, deadline: float) -> bytes:
        """``size`` bytes, or fewer when the server's end closed first.

        Each read takes what the pipe holds (at least ``_READ_AHEAD`` bytes are asked for), so
        an answer's marker, header and outputs usually come in one or two reads rather than
        one wait and read each; what is read past ``size`` waits in ``self._ahead``."""
        ahead = self._ahead
        while len(ahead) < size:
            _wait(fd, select.POLLIN, deadline)
            try:
                chunk = os.read(fd, min(max(size - len(ahead), _READ_AHEAD), MIB))
            except OSError:  # closed under us: the Sandbox is closing
                chunk = b""
            if not chunk:
                break
            ahead += chunk
        data = bytes(ahead[:size])
        del ahead[:size]
        return data

    def _receive(self, deadline: float, max_bytes: int) -> tuple[dict, list[bytes]]:
        """The next frame's header and blobs, all within ``max_bytes`` (else the server is lost)."""
        proc = self._proc
        if proc is None or proc.stdout is None or proc.stdout.closed:
            raise _Lost("killed", "the sandbox was closed")
        fd = proc.stdout.fileno()
        prefix = self._read_exact(fd, 4, deadline)
        if not prefix and self._job_left_unread(proc):
            raise _NeverStarted("the sandbox died before it read the job")
        if len(prefix) < 4:
            raise _Lost("killed", "the run ended its sandbox; it was replaced")
        (size,) = struct.unpack(">I", prefix)
        if size > min(max_bytes, _MAX_HEADER):
            raise _Lost("killed", f"the sandbox sent a {size}-byte header, over its bound; it was replaced")
        body = self._read_exact(fd, size, deadline)
        if len(body) < size:
            raise _Lost("killed", "the run ended its sandbox; it was replaced")
        header = json.loads(body)
        lengths = header.get("blobs", []) if isinstance(header, dict) else None
        if not isinstance(lengths, list) or not all(isinstance(n, int) and n >= 0 for n in lengths):
            raise ValueError("its header lists no blob lengths")
        if size + sum(lengths) > max_bytes:
            total = size + sum(lengths)
            raise _Lost("killed", f"the sandbox sent {total} bytes, over the {max_bytes} bound; it was replaced")
        blobs = []
        for length in lengths:
            blob = self._read_exact(fd, length, deadline)
            if len(blob) < length:
                raise _Lost("killed", "the run ended its sandbox; it was replaced")
            blobs.append(blob)
        return header, blobs

    def execute(self, job: Job) -> ExecResult:
        """Run one job; a broken server becomes a result (timeout or killed), then is replaced.

        A job whose server died before reading it is sent to a fresh server, once (see the
        module's docstring); only a second such death in a row is reported, as ``killed``.
        """
        started = time.monotonic()
        enforced = enforced_limits(job.limits)
        if self._cap is not None:
            self._cap.fit(job.limits)
        try:
            reply, blobs = self._deliver(job, enforced)
            result = result_from_reply(reply, blobs)
        except _Lost as exc:
            self.close()
            result = ExecResult(
                status=exc.status,
                exit_code=None,
                wall_s=time.monotonic() - started,
                detail=str(exc),
                sandbox_replaced=True,
            )
        except (KeyError, TypeError, ValueError) as exc:
            self.close()
            detail = f"the sandbox sent a malformed answer ({exc}); it was replaced"
            return ExecResult(
                status="killed",
                exit_code=None,
                wall_s=time.monotonic() - started,
                detail=detail,
                sandbox_replaced=True,
            )
        else:
            if reply.get("restart"):
                self.close()
                result = result.model_copy(update={"sandbox_replaced": True})
        return self._with_oom_kills(result, job.limits)

    def _deliver(self, job: Job, enforced: EnforcedLimits) -> tuple[dict, list[bytes]]:
        """Send ``job`` to a live server and return its answer (raises _Lost)."""
        framed = job_frame(job, enforced)
        transfer = sum(map(len, framed))
        budget = enforced.wall_limit_s + _GRACE_S + transfer / _BYTES_PER_S
        max_bytes = max_reply_bytes(enforced, job.capture)
        try:
            return self._exchange(framed, budget, max_bytes)
        except _NeverStarted:
            self.close()  # the run never started, so a fresh server may run it
        try:
            return self._exchange(framed, budget, max_bytes)
        except _NeverStarted as exc:
            raise _Lost("killed", f"{exc}, twice in a row; it was replaced") from None

    def _exchange(self, framed: list[bytes], budget: float, max_bytes: int) -> tuple[dict, list[bytes]]:
        if not self._is_ready():
            self.restart()
        self._forget_oom_kills()
        deadline = time.monotonic() + budget  # counted from here: starting a server is not the run's time
        self._send(framed, deadline)
        try:
            reply = self._receive(deadline, max_bytes)
        except _NeverStarted:
            raise
        except _Lost as exc:  # lost before its S: the run never started
            if exc.status == "killed" and self._start_byte() != _STARTED:
                raise _NeverStarted("the sandbox died before it started the run") from None
            raise
        marker = self._start_byte()
        if marker == _UNSERVED:
            raise _NeverStarted("the sandbox could not make the run's process")
        if marker != _STARTED:
            raise _Lost("killed", "the sandbox answered out of turn; it was replaced")
        return reply

    def _start_byte(self) -> bytes:
        """What the server wrote on its pipe of start bytes since the last answer: ``S`` once it
        handed the job to the run, ``U`` for a job no process was made for, nothing before
        either. Read only with the answer or once the server is lost, when nothing more can come."""
        if self._starts is None:
            return b""
        try:
            return os.read(self._starts, 2)
        except BlockingIOError:
            return b""

    def _forget_oom_kills(self) -> None:
        """Out-of-memory kills so far (of an idle server, say) are not the next run's."""
        if self._cap is not None:
            with contextlib.suppress(OSError):  # closed under us: the Sandbox is closing
                self._cap.new_oom_kills()

    def _with_oom_kills(self, result: ExecResult, limits: Limits) -> ExecResult:
        """A run the memory cgroup had to kill processes of is a memory_limit."""
        if self._cap is None or self._shut:
            return result
        try:
            killed = self._cap.new_oom_kills()
        except OSError:  # closed under us: the Sandbox is closing
            return result
        if not killed or result.status in ("timeout", "output_limit"):
            return result
        detail = f"memory limit of {limits.memory_mb} MiB reached by the run's processes together"
        return result.model_copy(update={"status": "memory_limit", "detail": detail})

    def restart(self) -> None:
        if self._shut:
            raise _Lost("killed", "the sandbox was closed")
        self.close()
        self.spawn()
        self.wait_ready()

    def close(self) -> None:
        """Kill the server; bubblewrap's --die-with-parent takes its whole PID namespace along."""
        proc, self._proc = self._proc, None
        pidfd, self._init_pidfd = self._init_pidfd, None
        bwrap_pidfd, self._bwrap_pidfd, self._idle_poll = self._bwrap_pidfd, None, None
        if bwrap_pidfd is not None:
            os.close(bwrap_pidfd)
        at_rest, self._at_rest = self._at_rest, None
        if at_rest is not None:
            at_rest.close()
        starts, self._starts = self._starts, None
        if starts is not None:
            os.close(starts)
        if proc is None:
            return
        if pidfd is not None:
            try:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            proc.wait(timeout=_GRACE_S if pidfd is not None else 0)  # bubblewrap reaps its init, then exits
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if pidfd is not None:
            select.select([pidfd], [], [], _GRACE_S)  # the init exits after every process of its namespace
            os.close(pidfd)
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()

    def _end(self) -> None:
        """Close an idle server's stdin and give it ``_END_WAIT_S`` to end: it reaps its
        template and the process it keeps for the next run, so that every process's CPU time
        is counted in the host's children's. A busy or broken server is left to ``close``,
        which kills it."""
        proc = self._proc
        if proc is None or proc.stdin is None or not self._is_ready():
            return
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            proc.stdin.close()
            proc.wait(timeout=_END_WAIT_S)

    def shutdown(self) -> None:
        """Close for good: an idle server is asked to end first (``_end``); also remove the
        memory cgroup."""
        self._shut = True
        self._end()
        self.close()
        if self._cap is not None:
            self._cap.remove()
