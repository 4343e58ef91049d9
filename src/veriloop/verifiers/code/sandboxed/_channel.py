"""The result channel of a sandboxed grading process, and the host's strict reading of it.

Inside the process, ``open_channel`` moves the process's stdout to a private descriptor and
points descriptors 0, 1 and 2 at /dev/null (2 stays stderr when the grader reads it), so
whatever the program under test prints never reaches the channel by accident. Each frame is one line: a per-run nonce, then JSON.

The candidate can still find the private descriptor (or the nonce) and write to it: it runs
in the same process. That is harmless by construction: frames carry only the candidate's own
return values as plain data, which it could have returned anyway; expected outputs are never
in its process, and the verdict is computed elsewhere. The host still treats any stray bytes,
a malformed frame or a repeated frame as tampering and fails the whole run.

Self-contained (standard library only): the source is also sent into sandboxed processes.
"""

import json as _json
import os as _os


def open_channel(nonce, keep_stderr=False):
    """Redirect stdin, stdout and (unless ``keep_stderr``) stderr to /dev/null; return
    ``emit(obj)`` writing one frame to the old stdout."""
    channel = _os.dup(1)
    null = _os.open(_os.devnull, _os.O_RDWR)
    for fd in (0, 1) if keep_stderr else (0, 1, 2):
        _os.dup2(null, fd)
    write, dumps, prefix = _os.write, _json.dumps, nonce.encode()

    def emit(obj):
        data = prefix + dumps(obj, separators=(",", ":"), allow_nan=False).encode() + b"\n"
        while data:
            data = data[write(channel, data) :]

    return emit


def describe_error(exc, filename=None, limit=300):
    """``'ValueError: bad input (line 4)'``: the exception type, message and, when it was
    raised in ``filename``, the last line number there. Never raises."""
    try:
        message = exc.msg if isinstance(exc, SyntaxError) else str(exc)
    except BaseException:
        message = "<unprintable message>"
    try:
        name = type(exc).__name__
    except BaseException:
        name = "Exception"
    text = f"{name}: {message}" if message else name
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    line = None
    if filename is not None:
        tb = getattr(exc, "__traceback__", None)
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == filename:
                line = tb.tb_lineno
            tb = tb.tb_next
        if line is None and isinstance(exc, SyntaxError) and exc.filename == filename:
            line = exc.lineno
    return f"{text} (line {line})" if line else text


def parse_frames(stdout, nonce):
    """``(frames, problem)``: the JSON objects on the channel, or a reason it was tampered with.

    A final line without its newline (output cut at a limit) is dropped, not a problem.
    """
    lines = stdout.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    elif lines:
        lines.pop()
    frames = []
    for line in lines:
        if not line.startswith(nonce):
            return frames, "stray output on the result channel"
        try:
            frame = _json.loads(line[len(nonce) :], parse_constant=_reject_frame_constant)
        except ValueError:
            return frames, "malformed frame on the result channel"
        if not isinstance(frame, dict):
            return frames, "malformed frame on the result channel"
        frames.append(frame)
    return frames, None


def _reject_frame_constant(name):
    raise ValueError(f"bare {name}")
