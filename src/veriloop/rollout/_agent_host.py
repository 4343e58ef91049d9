"""The warm process that agent functions run from (``rollout.agent.callable``); stdlib only.

    python .../_agent_host.py module:function        (in the agent's working directory)

It imports the agent's module once (the ``openai`` client alone takes most of a second of
CPU), then forks one child per request: the child gets a session of its own, the episode's
environment, its output in a log file, and writes the function's return value (text, or
JSON) to a result file. Requests come as JSON lines on standard input
(``{"id", "prompt", "env", "log", "result"}``); it answers ``{"id", "pid"}`` once a child is
forked and ``{"id", "exit"}`` once it has ended. It runs as a script, not as part of the
package, so that it imports nothing but the agent's own module.
"""

import asyncio
import importlib
import inspect
import json
import os
import select
import signal
import sys
import traceback


def main(target: str) -> None:
    sys.path[0] = os.getcwd()  # the agent's directory, not this file's
    module_name, _, function_name = target.partition(":")
    function = getattr(importlib.import_module(module_name), function_name)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a wake-up byte per ended child
    children: dict[int, int] = {}
    _emit({"ready": True})
    pending = b""
    stdin = sys.stdin.fileno()
    while True:
        try:
            readable, _, _ = select.select([stdin, wake_read], [], [])
        except InterruptedError:
            continue
        if wake_read in readable:
            os.read(wake_read, 4096)
        if stdin in readable:
            chunk = os.read(stdin, 1 << 16)
            if not chunk:
                break  # the trainer is gone
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                request = json.loads(line)
                pid = os.fork()
                if pid == 0:
                    _child(function, request, wake_read, wake_write)
                children[pid] = request["id"]
                _emit({"id": request["id"], "pid": pid})
        while children:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            _emit({"id": children.pop(pid, -1), "exit": os.waitstatus_to_exitcode(status)})
    for pid in children:
        _kill(pid)


def _child(function, request: dict, *inherited: int) -> None:
    """One episode, in the forked child; never returns."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in inherited:
            os.close(fd)
        os.setsid()  # anything it starts ends with it
        os.environ.clear()
        os.environ.update(request["env"])
        null = os.open(os.devnull, os.O_RDONLY)
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        result = function(request["prompt"])
        if inspect.isawaitable(result):
            result = asyncio.run(_awaited(result))
        with open(request["result"], "w", encoding="utf-8") as out:
            out.write(result if isinstance(result, str) else json.dumps(result))
        code = 0
    except BaseException:  # noqa: BLE001  (the traceback is the run's report)
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


async def _awaited(awaitable):
    return await awaitable


def _emit(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _kill(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


if __name__ == "__main__":
    main(sys.argv[1])
