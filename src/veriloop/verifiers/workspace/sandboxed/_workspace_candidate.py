"""The candidate process of a pytest run: the only process that runs the workspace's code.

Started by the test process (``_workspace_proxy.py``) the first time a test imports a module of
the workspace, with its own pipes and no other descriptor of the test process. It imports the
real modules and answers one request per line (JSON) with plain data, a handle, or the
exception raised; see ``_workspace_proxy.py`` for the requests. Nothing it answers can run code
in the test process: answers are nodes of JSON (``_crossing.py``): plain data, values rebuilt by
the tests' own classes, or numbers naming objects kept here. The functions the tests pass or
patch in (``lambda``, ``monkeypatch.setattr(module, "fetch", fake)``) arrive as code and are
rebuilt here (``code/sandboxed/_shipped_callables.py``), never called back in the test process.

The requests arrive on the descriptor that was stdin and the answers leave on the one that was
stdout; both are moved away at start, so the workspace's ``print`` and ``input`` meet a stdout
sent to stderr and an empty stdin instead of the protocol. What the code prints while answering
a request is sent back with the answer, so captured output reaches the tests.

Standard library only.
"""

import contextlib
import importlib
import io
import json
import operator
import os
import sys
import traceback

from veriloop.verifiers.workspace.sandboxed._crossing import node_of, value_of  # sandbox: strip

_wire = importlib.import_module("_wire")  # written beside this script by the runner (standard library only)
_shipped = importlib.import_module("_shipped_callables")  # likewise

OPERATORS = frozenset(
    "__len__ __getitem__ __setitem__ __delitem__ __contains__ __iter__ __next__ __bool__ __str__ __repr__ "
    "__hash__ __eq__ __ne__ __lt__ __le__ __gt__ __ge__ __add__ __sub__ __mul__ __truediv__ __floordiv__ "
    "__mod__ __pow__ __matmul__ __and__ __or__ __xor__ __lshift__ __rshift__ __radd__ __rsub__ __rmul__ "
    "__rtruediv__ __rfloordiv__ __rmod__ __rpow__ __neg__ __pos__ __abs__ __invert__ __int__ __float__ "
    "__index__ __enter__ __exit__ __instancecheck__ __round__ __reversed__ __dir__".split()
)
_FUNCTIONS = {
    "__len__": len, "__iter__": iter, "__next__": next, "__bool__": bool, "__str__": str, "__repr__": repr,
    "__hash__": hash, "__int__": int, "__float__": float, "__abs__": abs, "__reversed__": reversed,
    "__round__": round, "__dir__": lambda target: sorted(dir(target)),
    "__instancecheck__": lambda target, other: isinstance(other, target),
}  # fmt: skip
for _name in "eq ne lt le gt ge add sub mul truediv floordiv mod pow matmul and or xor lshift rshift".split():
    _FUNCTIONS["__%s__" % _name] = getattr(operator, _name if _name not in ("and", "or") else _name + "_")
    _FUNCTIONS["__r%s__" % _name] = lambda target, other, _op=_FUNCTIONS["__%s__" % _name]: _op(other, target)
for _name in "neg pos invert index getitem setitem delitem contains".split():
    _FUNCTIONS["__%s__" % _name] = getattr(operator, _name)
"""Operators called as the builtin or ``operator`` function (which checks result types, tries the
reflected method, accepts a class with only ``__getitem__`` for ``iter``), not as the bare method."""


class Handles:
    """The objects the tests hold a handle to, kept alive here and numbered once each."""

    def __init__(self):
        self.objects = {}
        self.numbers = {}
        self.rebuilt = _shipped.rebuilder(held=self.get)  # a test's function, calling objects kept here

    def number(self, value):
        key = id(value)
        if key not in self.numbers:
            self.numbers[key] = len(self.objects) + 1
            self.objects[self.numbers[key]] = value
        return self.numbers[key]

    def get(self, number):
        return self.objects[number]


def decoded(handles, node):
    """One argument of a request, built here from its node (``_crossing.py``): a function of the
    tests is rebuilt here, to run beside the code it is passed to."""

    def object_of(handle):
        if handle[0] == "fn":
            return _wire.decode_value(handle[1], 0, handles.rebuilt)
        return handles.get(handle[1])

    return value_of(node, object_of)


def described(handles, value):
    """The answer for a value: its node, whose handles name the objects kept here (an exception
    class's handle also says how the tests rebuild the class)."""

    def handle_of(kept):
        if isinstance(kept, type) and issubclass(kept, BaseException):
            return ["exc", handles.number(kept), exception_class(handles, kept)]
        return ["h", handles.number(kept)]

    return {"node": node_of(value, handle_of)}


def exception_class(handles, kind):
    """An exception class as the tests rebuild it: its name, the nearest builtin base, and the
    same for each of its own bases of the workspace (handles, most derived first)."""
    builtin = next(base for base in kind.__mro__ if base.__module__ == "builtins")
    chain = [base for base in kind.__mro__ if base.__module__ != "builtins"]
    return {
        "builtin": builtin.__name__,
        "chain": [[handles.number(base), base.__qualname__, base.__module__] for base in chain],
    }


def raised(handles, error):
    """The answer for an exception: its class (as ``exception_class``), arguments and text."""
    try:
        arguments = _wire.encode_value(tuple(error.args))
    except _wire.NotPlainData:
        arguments = None
    try:
        text = str(error)
    except Exception:
        text = "<unprintable %s>" % type(error).__name__
    return {
        "raised": exception_class(handles, type(error)),
        "instance": handles.number(error),
        "args": arguments,
        "text": text,
        "traceback": "".join(traceback.format_exception(error))[-3000:],
    }


def changed_arguments(arguments, before):
    """``[[position, new value]]`` of the plain lists, dicts and sets a call changed in place."""
    changes = []
    for position, (value, text) in enumerate(zip(arguments, before)):
        if text is not None and (now := _snapshot(value)) is not None and now != text:
            changes.append([position, json.loads(now)])
    return changes


def _snapshot(value):
    """The encoded text of a plain mutable container (others: None, they cannot change here)."""
    if type(value) not in (list, dict, set):
        return None
    try:
        return json.dumps(_wire.encode_value(value), sort_keys=True)
    except _wire.NotPlainData:
        return None


def perform(handles, request, arguments, keywords):
    """What one request asks for, done here; returns the value (an exception propagates)."""
    op = request["op"]
    if op == "import":
        sys.path[:] = request["path"]
        return importlib.import_module(request["name"])
    target = handles.get(request["target"])
    if op == "getattr":
        return getattr(target, request["name"])
    if op == "names":
        return sorted(name for name in vars(target) if not name.startswith("_"))
    if op == "setattr":
        return setattr(target, request["name"], arguments[0])
    if op == "delattr":
        return delattr(target, request["name"])
    if op == "call":
        return target(*arguments, **keywords)
    if op == "operator" and request["name"] in OPERATORS:
        name = request["name"]
        if name in _FUNCTIONS:
            return _FUNCTIONS[name](target, *arguments)
        return getattr(type(target), name)(target, *arguments)  # __enter__, __exit__
    raise ValueError("unknown request %r" % op)


def follow_the_tests(request):
    """The tests' working directory and environment (``monkeypatch.chdir``, ``setenv``), as the
    code would see them running in the tests' process."""
    if request.get("environ") is not None:
        os.environ.clear()
        os.environ.update(request["environ"])
    if request.get("cwd") and request["cwd"] != os.getcwd():
        os.chdir(request["cwd"])


def answer(handles, request):
    """The reply to one request, with what the code printed meanwhile."""
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            follow_the_tests(request)
            arguments = [decoded(handles, item) for item in request.get("args", [])]
            keywords = {name: decoded(handles, item) for name, item in request.get("kwargs", {}).items()}
            before = [_snapshot(value) for value in arguments]
            reply = described(handles, perform(handles, request, arguments, keywords))
            reply["changed"] = changed_arguments(arguments, before)
        except BaseException as error:  # the candidate's own failure is an answer, SystemExit included
            reply = raised(handles, error)
    reply["stdout"], reply["stderr"] = stdout.getvalue(), stderr.getvalue()
    return reply


def serve():
    """Answer requests until the test process closes its end."""
    requests = os.fdopen(os.dup(0), "rb")
    answers = os.fdopen(os.dup(1), "wb")
    empty = os.open(os.devnull, os.O_RDONLY)
    os.dup2(empty, 0)
    os.dup2(2, 1)
    sys.stdin = open(0, closefd=False)
    handles = Handles()
    for line in requests:
        reply = answer(handles, json.loads(line))
        try:
            text = json.dumps(reply)
        except (TypeError, ValueError) as error:  # text with lone surrogates, say
            text = json.dumps(raised(handles, RuntimeError("the answer could not be sent: %s" % error)))
        answers.write(text.encode() + b"\n")
        answers.flush()


if __name__ == "__main__":
    serve()
