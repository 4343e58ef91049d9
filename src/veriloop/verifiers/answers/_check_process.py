"""Entry point of one process of the check pool (``_check_pool.py``):
``python -m veriloop.verifiers.answers._check_process MODULE:FUNC MEMORY_MB PARENT_PID [fork]``.

Protocol: after importing MODULE the process writes ``{"ready": true}``; then for each JSON
line on stdin it writes ``{"ok": true, "value": ...}`` or ``{"ok": false, "error": "..."}``.
It exits on end of input, and the kernel kills it when the thread that started it ends, so a
stuck check never outlives its parent. Plugins the parent loaded (``VERILOOP_PLUGINS``, entry
points) are imported first, so MODULE may be one of them or use what they register.
PARENT_PID 0 skips the check that the parent is still the one that started it (inside a PID
namespace the parent is not visible).

With ``fork`` the process is a template: it never calls FUNC itself. Each request is handled
by a fresh child forked from it, which replies over a pipe of its own and exits; afterwards
the child's whole process group (and, when the template is PID 1 of its own namespace, every
other process in it) is killed. So nothing a check does to its interpreter (patched functions,
changed globals, threads, processes left behind) reaches the next check. If MODULE defines
``prepare(request)``, the template calls it before forking: it may build and cache trusted
data (never touching the untrusted parts of the request) that every later child inherits.
The template is not dumpable, so a child cannot read its memory through /proc. The
directories named in ``VERILOOP_SCRATCH_DIRS`` (``os.pathsep``-separated: a box's private
``/tmp``) are emptied after every check; when that fails the template exits after replying,
so its box is replaced rather than handed on dirty.
"""

from __future__ import annotations

import ctypes
import gc
import importlib
import json
import os
import resource
import signal
import sys
from collections.abc import Callable
from typing import Any

_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
MAX_CHILD_REPLY_BYTES = 1 << 20


def _prctl(option: int, value: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _die_with_parent(parent_pid: int) -> None:
    if not _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL):
        return
    if parent_pid and os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)


def _limit_memory(memory_mb: int) -> None:
    if memory_mb > 0:
        limit = memory_mb * 1024 * 1024
        try:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        except (ValueError, OSError):
            pass


def _encode(payload: dict) -> bytes:
    try:
        return json.dumps(payload).encode() + b"\n"
    except (TypeError, ValueError) as exc:
        return json.dumps({"ok": False, "error": f"reply is not JSON data: {exc}"}).encode() + b"\n"


def _reply(channel, payload: dict) -> None:
    channel.write(_encode(payload))
    channel.flush()


def _call(function: Callable[[Any], Any], line: bytes) -> dict:
    try:
        return {"ok": True, "value": function(json.loads(line))}
    except Exception as exc:
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}


def _run_child(function: Callable[[Any], Any], line: bytes, reply_fd: int, closed: list[int]) -> None:
    """In the forked child: answer one request on ``reply_fd`` and exit without cleanup."""
    try:
        gc.disable()  # a short-lived child: a collection would copy every page it walks
        os.setpgid(0, 0)
        for fd in closed:  # the child never sees the template's request and reply channels
            os.close(fd)
        data = _encode(_call(function, line))
        os.write(reply_fd, data[:MAX_CHILD_REPLY_BYTES])
    finally:
        os._exit(0)


def _read_reply_line(fd: int) -> bytes:
    """The first line on ``fd`` (processes the child started may hold the pipe open after it)."""
    data = b""
    while b"\n" not in data and len(data) <= MAX_CHILD_REPLY_BYTES:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        data += chunk
    return data.partition(b"\n")[0]


def _end_check(child: int) -> int:
    """Kill the child and whatever it started (as PID 1 of a namespace: every other process);
    reap them all. The child's wait status."""
    as_init = os.getpid() == 1
    kills = [(os.killpg, child), *([(os.kill, -1)] if as_init else [])]
    for send, target in kills:
        try:
            send(target, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        status = os.waitpid(child, 0)[1]
    except ChildProcessError:
        status = -1
    while True:
        try:
            if os.waitpid(-1, 0 if as_init else os.WNOHANG)[0] == 0:
                return status
        except ChildProcessError:
            return status


def _remove(path: str) -> None:
    """Remove ``path`` and all below it, whatever permissions the check left on it."""
    if os.path.isdir(path) and not os.path.islink(path):
        os.chmod(path, 0o700)
        for name in os.listdir(path):
            _remove(os.path.join(path, name))
        os.rmdir(path)
    else:
        os.unlink(path)


def _kept(path: str, keep: tuple[str, ...]) -> bool:
    """``path`` is a kept mount, or a directory leading to one."""
    return path in keep or any(k.startswith(path + "/") for k in keep)


def _empty(directory: str, keep: tuple[str, ...] = ()) -> bool:
    """Remove everything inside ``directory`` except the ``keep`` paths (read-only mounts) and the
    directories leading to them; whether that worked."""
    try:
        os.chmod(directory, 0o1777)
        for name in os.listdir(directory):
            path = os.path.join(directory, name)
            if path in keep:
                continue
            if _kept(path, keep):
                if not _empty(path, keep):
                    return False
            else:
                _remove(path)
        return all(_kept(os.path.join(directory, name), keep) for name in os.listdir(directory))
    except (OSError, RecursionError):
        return False


def _forked_reply(function: Callable[[Any], Any], line: bytes, closed: list[int]) -> dict:
    read_fd, write_fd = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read_fd)
        _run_child(function, line, write_fd, closed)
    os.close(write_fd)
    try:
        data = _read_reply_line(read_fd)
    finally:
        os.close(read_fd)
    status = _end_check(child)
    try:
        reply = json.loads(data)
    except ValueError:
        reply = None
    if not isinstance(reply, dict) or "ok" not in reply:
        return {"ok": False, "error": f"check child ended without a reply (wait status {status})"}
    return reply


def _serve_forking(module: Any, function: Callable[[Any], Any], channel, requests) -> None:
    prepare = getattr(module, "prepare", None)
    closed = [0, channel.fileno()]
    scratch = [d for d in os.environ.get("VERILOOP_SCRATCH_DIRS", "").split(os.pathsep) if d]
    keep = tuple(k for k in os.environ.get("VERILOOP_SCRATCH_KEEP", "").split(os.pathsep) if k)
    for line in requests:
        if prepare is not None:
            try:
                prepare(json.loads(line))
            except Exception as exc:
                _reply(channel, {"ok": False, "error": f"{type(exc).__name__}: {exc}"})
                continue
        gc.freeze()  # what the template built stays shared with children, unwalked by their collector
        _reply(channel, _forked_reply(function, line, closed))
        if not all(_empty(directory, keep) for directory in scratch):
            os._exit(1)


def main(argv: list[str]) -> int:
    target, memory_mb, parent_pid = argv[0], int(argv[1]), int(argv[2])
    forking = argv[3:4] == ["fork"]
    _die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    # Replies go to a private copy of stdout; anything a library prints goes to stderr.
    channel = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    try:
        from veriloop.core import load_plugins

        load_plugins()
        module_name, _, function_name = target.partition(":")
        module = importlib.import_module(module_name)
        function = getattr(module, function_name)
    except Exception as exc:
        _reply(channel, {"ready": False, "error": f"cannot load {target}: {type(exc).__name__}: {exc}"})
        return 1
    _limit_memory(memory_mb)
    if forking:
        _prctl(_PR_SET_DUMPABLE, 0)
    _reply(channel, {"ready": True})
    if forking:
        _serve_forking(module, function, channel, sys.stdin.buffer)
        return 0
    for line in sys.stdin.buffer:
        _reply(channel, _call(function, line))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
