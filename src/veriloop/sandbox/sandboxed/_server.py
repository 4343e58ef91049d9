"""The sandbox server: a warm interpreter inside bubblewrap that runs one child per job.

The host (``_server_handle.py``) starts it as ``python3 -I -c <script> [MODULE...] FD``, the script
being this folder's modules joined (``_bwrap.SERVER_MODULES``, ``sandbox/_shipped.py``; this one
last) and the modules an environment's to pre-import. It never imports
veriloop (standard library only, Python >= 3.9). It reads jobs on stdin and answers on stdout,
each a frame (``read_frame``): a JSON header, then files, archives and outputs as raw bytes. Each
job carries ``enforced``: the limits of the run as exact numbers, computed
by the host (``_limits.enforced_limits``); the server applies them and derives none of its own.

At start, before it reads any job, the server forks a *template*: a copy of the warm interpreter
that never reads job data. Runs are copies of the template, never of the server (which has held
earlier runs' code and outputs), so no run can find another's data in its memory. For each job

1. the template clones a child with ``CLONE_PARENT`` (so the child is the server's own, to wait
   for and account), asked for once the last run's answer is sent (step 4), so that its making
   overlaps the host's turnaround and does not delay the answer, after checking that its own
   limits, priority, affinity and OOM score are those it started with, and moving to a fresh network namespace if the last run left sockets in its own
   (TIME_WAIT ones outlive every process); the server sends the job over a pipe, and the child
   unpacks the workspace and applies the rlimits (the seccomp filter that keeps it from
   signalling the template it inherits: the template loads it on itself), then runs the Python source in a fresh ``__main__`` (the fast path: a copy of a
   warm process, not an interpreter start) or execs the command;
2. the server feeds stdin, keeps at most the cap of stdout and stderr, and enforces the deadline;
3. it SIGKILLs every other process of the PID namespace but the template and reaps them all
   (they are all the run's, and as the namespace's init the server inherits every orphan), unless
   the namespace made no process after the run's own (``ns_last_pid``): then there is none;
4. it answers with the outcome (a snapshot asked for is streamed from the workspace into the
   answer, never held in memory), or asks the host for a fresh sandbox if the template died,
   is stopped or has a signal pending (a run can signal it through a file's I/O owner, a path
   the seccomp guard cannot see), or its own or the template's process settings changed; then
   asks the template for the next run's process. A template that does not answer within
   ``ANSWER_WAIT_S`` is given up on: the job never started (``U`` below);
5. it empties every writable mount (and removes SysV IPC objects where the seccomp filter does
   not deny them), so nothing of the run survives into the next one (a mount still as it was
   last emptied, by its free inodes and its root's mode, is only looked at); a server that cannot
   exits, and the host starts a fresh sandbox before the next job. Each answer
   follows one byte on a pipe of its own (its descriptor is the server's last argument): ``S``,
   sent the moment the job is handed to the run's process (a server the host loses after it ran
   a job that may have started), or ``U`` for a job no process could be made for, or whose
   process was gone before it had the whole job (it never started: the host runs it on a fresh
   sandbox). The host reads it only with the answer, or
   once the server is lost, so it is never woken for it.

The server is the PID namespace's init, so the run's processes cannot signal it (the kernel
drops their signals to an init without handlers); neither it nor the template is dumpable, so
runs can neither ptrace them nor open their /proc files.
"""

import gc
import json
import os
import signal
import struct
import sys
import time
import types

from veriloop.sandbox.sandboxed._frames import read_frame, write_all, write_frame, write_parts  # sandbox: strip
from veriloop.sandbox.sandboxed._kernel import PR_SET_DUMPABLE, drop_capabilities, libc  # sandbox: strip
from veriloop.sandbox.sandboxed._kernel import process_settings  # sandbox: strip
from veriloop.sandbox.sandboxed._run import JOB_LENGTH, child_job, on_sigint, read_hard_limits  # sandbox: strip
from veriloop.sandbox.sandboxed._scratch import clean_scratch, prepare_scratch  # sandbox: strip
from veriloop.sandbox.sandboxed._supervise import classify, ended_or_ending, kill_everything  # sandbox: strip
from veriloop.sandbox.sandboxed._supervise import nothing_made_since, read_capped, supervise  # sandbox: strip
from veriloop.sandbox.sandboxed._template import SPAWN_FDS, Template  # sandbox: strip
from veriloop.sandbox.sandboxed._workspace_files import plan_archive, stream_archive  # sandbox: strip

WARM_MODULES = (
    "abc",
    "array",
    "atexit",
    "base64",  # the graders' scripts decode their precompiled harness with it: 1 ms a run otherwise
    "bisect",
    "collections",
    "contextlib",
    "copy",
    "dataclasses",
    "datetime",
    "decimal",
    "enum",
    "fractions",
    "functools",
    "heapq",
    "itertools",
    "json",
    "math",
    "operator",
    "random",
    "re",
    "statistics",
    "string",
    "textwrap",
    "threading",
    "traceback",
    "types",
    "typing",
    "unittest",
)


class Child:
    """The next run's process, asked of the template once the last run's answer is sent (so
    that its making overlaps the host's turnaround and the emptying of the mounts, and does not
    delay the answer), and the server's ends of its pipes."""

    def __init__(self, template):
        pipes = [os.pipe() for _ in range(SPAWN_FDS - 1)]
        pipes.append(os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC))  # the report: read once, after the run, never waited on
        theirs = (pipes[0][0], pipes[1][0], pipes[2][1], pipes[3][1], pipes[4][1])
        self.ends = (pipes[0][1], pipes[1][1], pipes[2][0], pipes[3][0], pipes[4][0])
        self.template = template
        self.asked = template.request(theirs)
        for fd in theirs:
            os.close(fd)

    def pid(self):
        """Its pid once the template has made it, or None (its pipes are then closed)."""
        pid = self.template.answer() if self.asked else None
        if pid is None:
            for fd in self.ends:
                os.close(fd)
        return pid


def run_job(frame, child):
    """Run the job on ``child``, a process the template made before the job came; returns the
    answer."""
    _, job, blobs = frame
    enforced = job["enforced"]
    started = time.monotonic()
    pid = child.pid()
    if pid is None:
        return unserved(started)
    job_w, stdin_w, stdout_r, stderr_r, report_r = child.ends
    if process_settings() != SETTINGS:
        os.close(job_w)  # the child exits without a job
        for fd in (stdin_w, stdout_r, stderr_r, report_r):
            os.close(fd)
        os.waitpid(pid, 0)
        return unserved(started)
    try:
        parts = child_job(job, blobs)
        write_parts(job_w, [JOB_LENGTH.pack(sum(map(len, parts))), *parts])
    except BrokenPipeError:  # the child was gone before it had its whole job: it never ran it
        for fd in child.ends:
            os.close(fd)
        os.waitpid(pid, 0)
        return unserved(started)
    os.close(job_w)
    write_all(STARTS_OUT, STARTED)  # from here the run may have begun: a host that loses us now reports it killed
    outputs = {stdout_r: bytearray(), stderr_r: bytearray()}
    ending = supervise(pid, enforced, blobs[job["stdin"]], stdin_w, outputs, started)
    if ending is not None:  # else it has exited; the rest once it is reaped: its rusage then counts its reaped children
        os.kill(pid, signal.SIGKILL)
    _, wait_status, usage = os.wait4(pid, 0)
    wall_s = time.monotonic() - started
    template_died = not nothing_made_since(pid) and kill_everything(TEMPLATE_PID)
    cap = enforced["output_bytes"]
    for fd, buffer in outputs.items():  # blocking pipes, every writer gone: read to their end
        while read_capped(fd, buffer, cap):
            pass
        os.close(fd)
        if len(buffer) > cap and ending is None:
            ending = "output_limit"
    try:
        note = os.read(report_r, 4096).decode("utf-8", "replace")
    except BlockingIOError:
        note = ""
    os.close(report_r)
    stdout, stderr = outputs[stdout_r][:cap], outputs[stderr_r][:cap]
    status, exit_code, detail = classify(enforced, ending, wait_status, usage, stderr, note)
    reply = {
        "status": status,
        "exit_code": exit_code,
        "stdout": bytes(stdout),
        "stderr": bytes(stderr),
        "wall_s": wall_s,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "detail": detail,
        "snapshot": None,
        "restart": False,
    }
    if job.get("capture"):
        plan_into(reply, enforced["snapshot_bytes"])
    if template_died or os.waitpid(TEMPLATE_PID, os.WNOHANG)[0] or ended_or_ending(TEMPLATE_PID):
        reply["restart"] = True
        reply["detail"] = add_note(
            reply["detail"], "sandbox replaced: the run ended, stopped or signalled its template process"
        )
    return reply


def unserved(started):
    """The answer for a job no process could be made for: the host replaces this sandbox and
    sends the job, which never started, to the next one."""
    detail = "sandbox replaced: the template or the process it made for the run is gone, or its settings were changed"
    if process_settings() != SETTINGS:
        detail = "sandbox replaced: the server's process settings were changed"
    return {
        "status": "killed",
        "exit_code": None,
        "stdout": b"",
        "stderr": b"",
        "wall_s": time.monotonic() - started,
        "cpu_s": 0.0,
        "detail": detail,
        "snapshot": None,
        "restart": True,
        "started": False,
    }


def plan_into(reply, limit):
    try:
        plan = plan_archive(limit)
        problem = "workspace too large to snapshot"
    except OSError as exc:
        plan, problem = None, "could not snapshot the workspace: %s" % exc
    if plan is None:
        reply["detail"] = add_note(reply["detail"], problem)
    else:
        reply["snapshot"] = plan


def send_reply(fd, reply):
    """The answer as a frame: its outputs as blobs after the JSON, then the planned snapshot
    streamed from the workspace as the last blob."""
    outputs = [reply.pop("stdout"), reply.pop("stderr")]
    plan = reply.pop("snapshot")
    lengths = [len(blob) for blob in outputs] + ([plan[1]] if plan is not None else [])
    data = json.dumps(dict(reply, snapshot=plan is not None, blobs=lengths)).encode()
    write_parts(fd, [struct.pack(">I", len(data)), data, *outputs])  # one write: the host wakes once
    if plan is not None:
        stream_archive(fd, plan[0])


def add_note(detail, note):
    return detail + "; " + note if detail else note


SETTINGS = None  # process_settings() of this server at start, checked before each job
STARTS_OUT = None  # the host's pipe for the byte before each answer (the last argument: its descriptor)
STARTED, UNSERVED = b"S", b"U"  # before an answer: whether the job was handed to a run, or never was
TEMPLATE_PID = None  # spared when the server ends a run's processes


def end(template, child):
    """The host closed our stdin: let the process kept for the next run and the template go
    (each exits at the end of its pipe) and reap them, so that their CPU time is counted in
    ours, and so in the host's (what the benchmarks count). A template that does not end keeps
    us here until the host kills the sandbox."""
    for fd in child.ends:
        os.close(fd)
    template.requests.close()
    while True:
        try:
            os.wait()
        except ChildProcessError:
            return


PRELOAD_DIR = "/preload/"  # where the host puts the modules it preloads (``Sandbox(preload=...)``)


def preload(path):
    """Define the module the host sent as ``path`` (``PRELOAD_DIR/NAME.py``, its own code: standard
    library only) under ``NAME``, once, before the template is forked: every run then finds it in
    ``sys.modules`` instead of compiling and loading it. It holds no job's data, as the template
    never does. A module that does not load ends the server: the host reports the sandbox unusable."""
    name = path[len(PRELOAD_DIR) : -len(".py")]
    with open(path, encoding="utf-8") as handle:
        source = handle.read()
    module = types.ModuleType(name)
    exec(compile(source, "<%s>" % name, "exec", dont_inherit=True), module.__dict__)
    sys.modules[name] = module


def release_free_heap():
    """Give back to the kernel the heap pages the script's compilation and the warm imports
    freed, before the template is forked: each run's clone copies the page table of every
    page still mapped, and its exit frees them (glibc's ``malloc_trim``; a no-op elsewhere)."""
    trim = getattr(libc, "malloc_trim", None)
    if trim is not None:
        trim(0)


def main():
    control_in, control_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    signal.signal(signal.SIGINT, on_sigint)
    sys.dont_write_bytecode = True
    for name in WARM_MODULES:
        __import__(name)
    global STARTS_OUT, SETTINGS, TEMPLATE_PID
    *warm, starts_fd = sys.argv[1:]
    STARTS_OUT = int(starts_fd)
    for name in warm:
        if name.startswith(PRELOAD_DIR):
            preload(name)
            continue
        try:  # the environment's own (checked to import when it was built)
            __import__(name)
        except Exception:
            pass  # a warm module saves time; without it a run imports it itself
    prepare_scratch()
    SETTINGS = process_settings()
    read_hard_limits()
    release_free_heap()
    gc.freeze()  # a run's collections then skip the warm heap instead of copying its pages
    template = Template((control_in, control_out, STARTS_OUT))  # before the first job: it never sees one
    TEMPLATE_PID = template.pid
    drop_capabilities()  # only the template needs them
    child = Child(template)
    write_frame(control_out, {"ready": True, "helpers": [TEMPLATE_PID]})  # the processes the host watches
    while True:
        frame = read_frame(control_in)
        if frame is None:
            end(template, child)
            return
        reply = run_job(frame, child)
        if not reply.pop("started", True):
            write_all(STARTS_OUT, UNSERVED)
        send_reply(control_out, reply)
        child = Child(template)
        clean_scratch()


if __name__ == "__main__":
    main()
