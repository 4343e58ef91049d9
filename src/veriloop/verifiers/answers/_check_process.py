"""Entry point of one process of the check pool (``_check_pool.py``):
``python -m veriloop.verifiers.answers._check_process MODULE:FUNC MEMORY_MB PARENT_PID``.

Protocol: after importing MODULE the process writes ``{"ready": true}``; then for each JSON
line on stdin it writes ``{"ok": true, "value": ...}`` or ``{"ok": false, "error": "..."}``.
It exits on end of input, and the kernel kills it when the thread that started it ends, so a
stuck check never outlives its parent. Plugins the parent loaded (``VERILOOP_PLUGINS``, entry
points) are imported first, so MODULE may be one of them or use what they register.
"""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import resource
import signal
import sys

_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent_pid: int) -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)


def _limit_memory(memory_mb: int) -> None:
    if memory_mb > 0:
        limit = memory_mb * 1024 * 1024
        try:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        except (ValueError, OSError):
            pass


def _reply(channel, payload: dict) -> None:
    try:
        line = json.dumps(payload)
    except (TypeError, ValueError) as exc:
        line = json.dumps({"ok": False, "error": f"reply is not JSON data: {exc}"})
    channel.write(line.encode() + b"\n")
    channel.flush()


def main(argv: list[str]) -> int:
    target, memory_mb, parent_pid = argv[0], int(argv[1]), int(argv[2])
    _die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    # Replies go to a private copy of stdout; anything a library prints goes to stderr.
    channel = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    try:
        from veriloop.core import load_plugins

        load_plugins()
        module_name, _, function_name = target.partition(":")
        function = getattr(importlib.import_module(module_name), function_name)
    except Exception as exc:
        _reply(channel, {"ready": False, "error": f"cannot load {target}: {type(exc).__name__}: {exc}"})
        return 1
    _limit_memory(memory_mb)
    _reply(channel, {"ready": True})
    for line in sys.stdin.buffer:
        try:
            reply = {"ok": True, "value": function(json.loads(line))}
        except Exception as exc:
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        _reply(channel, reply)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
