"""Runs inside the candidate's sandboxed process: an audit hook that reports what the code did.

Source rules cannot tell what a program does: ``from os import system``, ``getattr(importlib.
import_module("o" + "s"), "sys" + "tem")`` and ``inspect.currentframe()`` all dodge a regex.
CPython's audit hooks (``sys.addaudithook``, PEP 578) see the operation itself, however it was
reached, and cannot be removed once added. ``run_audited_candidate`` adds one before the
candidate's code is compiled, then runs ``run_candidate`` (``_candidate_process``).

Reported: process creation (``_posixsubprocess.fork_exec``, which has no audit event, is
replaced by one that reports and refuses) and signals, changing directory, links, ``ctypes``, listing or changing paths outside the working directory, frame and stack access (``sys._getframe``
outside the standard library's own bookkeeping, ``tb_frame``, ``gi_frame``, ...), tracing,
profiling, new audit hooks, ``gc`` object walks, sockets, and opening a path outside the
working directory (reads of the Python installation and a few devices excepted).

Each report is one frame (``{"audit": event, "what": ...}``) written to a private copy of the
result pipe *before* the operation proceeds, so the candidate cannot undo it: frames already in
a pipe cannot be taken back, and a forged frame only adds a report against itself. If the
candidate has closed or replaced that descriptor (the only way to silence the hook without an
audited operation), the hook cannot report: it kills the process instead, so the operation
never happens and the host sees a process killed outside any limit.

Sent into the sandbox after ``_wire``, ``_channel`` and ``_candidate_process``; the imports
below are for readers and linters and are stripped from the script.
"""

import os as _audit_os
import sys as _audit_sys

from veriloop.verifiers.code.sandboxed._candidate_process import CANDIDATE_FILE, run_candidate  # sandbox: strip

_ALWAYS = frozenset(
    {
        "os.system",
        "os.exec",
        "os.posix_spawn",
        "os.spawn",
        "os.fork",
        "os.forkpty",
        "os.kill",
        "os.killpg",
        "os.chdir",
        "os.symlink",
        "os.link",
        "subprocess.fork_exec",
        "pty.spawn",
        "subprocess.Popen",
        "sys._current_frames",
        "sys._current_exceptions",
        "sys.settrace",
        "sys.setprofile",
        "sys.addaudithook",
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
    }
)
# Reported only while the candidate's code is on the stack (the harness reads tracebacks too), or
# in any thread but the harness's own: a thread the candidate started may run code compiled under
# another file name, whose stack holds no frame of the candidate's.
_WHILE_CANDIDATE = frozenset({"sys._getframe", "object.__getattr__", "compile", "code.__new__"})
_PREFIXES = ("ctypes.", "socket.")
# Of the attribute reads CPython audits, those that hand out a frame (from which f_back and
# f_globals reach the harness); reading a function's __code__ does not.
_FRAME_ATTRIBUTES = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
# Standard modules that call sys._getframe(1) only to name the module defining a class, known
# by their file (code the candidate compiles under such a file name is reported).
_BOOKKEEPING = ("/collections/__init__.py", "/typing.py", "/enum.py")
# Events whose first arguments are paths: changing them (anywhere outside the working directory),
# or listing them (outside it and the Python installation).
_CHANGES_PATHS = frozenset(
    {
        "os.remove",
        "os.rmdir",
        "os.mkdir",
        "os.rename",
        "os.chmod",
        "os.chown",
        "os.truncate",
        "os.utime",
        "shutil.rmtree",
    }
)
_LISTS_PATHS = frozenset({"os.listdir", "os.scandir"})
_DEVICES = ("/dev/null", "/dev/urandom", "/dev/random", "/dev/zero")
_IMPORTS = ("ctypes", "_ctypes", "_posixsubprocess")


def _reader_roots():
    roots = set()
    for prefix in (_audit_sys.prefix, _audit_sys.base_prefix, _audit_sys.exec_prefix, _audit_sys.base_exec_prefix):
        if prefix:
            roots.add(_audit_os.path.realpath(prefix) + "/")
    return tuple(roots)


def _absolute(path, directory):
    """``path`` made absolute against ``directory`` and normalised by string rules alone: the
    candidate can replace ``os.path``'s helpers, so none of them is called once it runs."""
    if not path.startswith("/"):
        path = directory + path
    parts = []
    for part in path.split("/"):
        if part == "..":
            if parts:
                parts.pop()
        elif part and part != ".":
            parts.append(part)
    return "/" + "/".join(parts)


def _plain_text(text):
    """``text`` with only printable ASCII other than quotes and backslashes: safe inside a JSON string."""
    return "".join(c if " " <= c <= "~" and c not in '"\\' else "?" for c in text)


def _forbidden_fork_exec(*args, _vl_audit=_audit_sys.audit, _vl_refused=PermissionError, **kwargs):
    # Replaces _posixsubprocess.fork_exec, which starts processes without an audit event of its own.
    # What it calls is bound at definition: the candidate may rebind this module's globals.
    _vl_audit("subprocess.fork_exec")
    raise _vl_refused("starting processes is not allowed here")


# The standard library's own bindings of _posixsubprocess.fork_exec, by module and name.
_FORK_EXEC_NAMES = (("_posixsubprocess", "fork_exec"), ("subprocess", "_fork_exec"))


def _refuse_fork_exec():
    """Point every module's binding of ``_posixsubprocess.fork_exec`` at ``_forbidden_fork_exec``.

    The standard library's are found by name. Only when the function is still referenced after
    that (a warm module bound it too) is every module searched: reading all their values in a
    forked run writes the reference count of each, which copies most of the warm heap's pages
    (about 6 ms a run, more than the rest of a small run).
    """
    import _posixsubprocess

    original = _posixsubprocess.fork_exec
    for module_name, name in _FORK_EXEC_NAMES:
        module = _audit_sys.modules.get(module_name)
        if module is not None and module.__dict__.get(name) is original:
            setattr(module, name, _forbidden_fork_exec)
    if _audit_sys.getrefcount(original) <= 2:  # ``original`` and the call's argument: no other binding
        return
    for module in list(_audit_sys.modules.values()):
        for name, value in list(getattr(module, "__dict__", {}).items()):
            if value is original:
                setattr(module, name, _forbidden_fork_exec)


def install_audit_hook(nonce):
    """Add the hook; it writes its frames, prefixed with ``nonce``, to a copy of descriptor 1.

    Everything the hook calls or reads is bound here, before the candidate runs: the candidate
    may replace module attributes (``os.write``, ``json.dumps``, ``os.path.realpath``), rebind
    this module's globals (``sys.modules["__main__"]._ALWAYS = frozenset()``) or the built-ins
    (``builtins.any = lambda _: False``) without any audited operation, so the hook looks up no
    global name once it runs: its verdict on an event cannot be changed from inside.
    """
    import _thread
    import builtins

    any, bool, bytes, int, len, str, tuple, type = (  # the closures below read these, never builtins
        builtins.any,
        builtins.bool,
        builtins.bytes,
        builtins.int,
        builtins.len,
        builtins.str,
        builtins.tuple,
        builtins.type,
    )
    BaseException, OSError = builtins.BaseException, builtins.OSError
    always, prefixes, changes_paths, lists_paths = _ALWAYS, _PREFIXES, _CHANGES_PATHS, _LISTS_PATHS
    imports, while_candidate, frame_attributes, bookkeeping_files = (
        _IMPORTS,
        _WHILE_CANDIDATE,
        _FRAME_ATTRIBUTES,
        _BOOKKEEPING,
    )
    devices, candidate_file, absolute, plain_text = _DEVICES, CANDIDATE_FILE, _absolute, _plain_text

    _refuse_fork_exec()
    fd = _audit_os.dup(1)
    stat = _audit_os.fstat(fd)
    identity = (stat.st_dev, stat.st_ino)
    write, fstat, getframe, kill, getpid, thread = (
        _audit_os.write,
        _audit_os.fstat,
        _audit_sys._getframe,
        _audit_os.kill,
        _audit_os.getpid,
        _thread.get_ident,
    )
    writes = _audit_os.O_WRONLY | _audit_os.O_RDWR | _audit_os.O_CREAT
    workspace = _audit_os.path.realpath(_audit_os.getcwd()) + "/"
    readable = _reader_roots()
    prefix, busy = nonce.encode(), set()  # busy: threads inside the hook now
    harness_thread = thread()

    def candidate_on_stack(frame):
        while frame is not None:
            if frame.f_code.co_filename == candidate_file:
                return True
            frame = frame.f_back
        return False

    def installed(filename):
        if type(filename) is bytes:
            filename = filename.decode("utf-8", "replace")
        return type(filename) is str and filename.startswith(readable)

    def outside(args):
        path, mode, flags = (tuple(args) + (None, None, None))[:3]
        if type(path) is int:
            return False  # a descriptor already open
        if type(path) is bytes:
            path = path.decode("utf-8", "replace")
        elif type(path) is not str:
            return True  # an object with __fspath__: its own code decides the path
        full = absolute(path, workspace)
        if (full + "/").startswith(workspace) or full in devices:
            return False
        writing = (type(mode) is str and any(c in mode for c in "wax+")) or (type(flags) is int and flags & writes)
        return bool(writing) or not full.startswith(readable)

    def path_outside(path, changing):
        if path is None:
            return False  # the working directory
        return outside((path, "w" if changing else "r", 0))

    def describe(args):
        # Only plain values are shown: repr() of the candidate's objects would run its code here.
        shown = []
        for arg in args if type(args) is tuple else ():
            if type(arg) in (str, int):
                shown.append(str(arg)[:80])
            elif type(arg) is bytes:
                shown.append(arg[:80].decode("utf-8", "replace"))
            else:
                shown.append("?")
        return " ".join(shown)

    def report(event, what):
        text = '{"audit":"' + plain_text(event[:80]) + '","what":"' + plain_text(what[:200]) + '"}'
        data = prefix + text.encode("ascii") + b"\n"
        try:
            now = fstat(fd)
            if (now.st_dev, now.st_ino) != identity:
                raise OSError("the report channel was replaced")
            while data:
                data = data[write(fd, data) :]
        except BaseException:
            kill(getpid(), 9)  # silenced: never let the operation through unreported

    def flagged(event, args):
        if event in always or event.startswith(prefixes):
            return True
        if event == "open":
            return bool(args) and outside(args)
        if event in changes_paths:
            return any(path_outside(path, True) for path in tuple(args)[:2] if type(path) is not int)
        if event in lists_paths:
            return bool(args) and type(args[0]) is not int and path_outside(args[0], False)
        if event == "import":
            return bool(args) and args[0] in imports
        if event in while_candidate:
            caller = getframe(2)  # the code that raised the event (above this function and the hook)
            if event == "object.__getattr__" and not (len(args) > 1 and args[1] in frame_attributes):
                return False
            if event == "compile" and not (len(args) > 1 and installed(args[1])):
                return False  # compiling is fine; only code passing itself off as the standard library is not
            filename = caller.f_code.co_filename
            bookkeeping = event == "sys._getframe" and installed(filename) and filename.endswith(bookkeeping_files)
            return not bookkeeping and (thread() != harness_thread or candidate_on_stack(caller))
        return False

    def hook(event, args):
        me = thread()
        if me in busy:
            return  # an event raised by this thread's own hook call
        busy.add(me)
        try:
            if flagged(event, args):
                report(event, describe(args))
        finally:
            busy.discard(me)

    _audit_sys.addaudithook(hook)


def run_audited_candidate(job):
    """``run_candidate(job)`` with the audit hook added first (see the module docstring)."""
    install_audit_hook(job["nonce"])
    run_candidate(job)
