"""The tests' side of the workspace's code: proxies that forward every use to the candidate process.

The test process never runs a line of the workspace: a module of the workspace is a
``ModuleProxy``, and what it hands out is plain data (``code/sandboxed/_wire.py``: decoded here,
so nothing of the candidate's runs when the tests compare it) or a ``Proxy`` naming an object kept
in the candidate process (``_workspace_candidate.py``). Attributes, calls, iteration, ``len``,
indexing, ``in``, arithmetic, ``str`` and ``repr`` of a proxy are requests to that process.

Rules that keep the verdict out of the candidate's hands:

- a proxy is never equal to plain data, and ordering it against plain data is a TypeError: an
  object that compares equal to anything cannot pass ``assert f() == 3``; two proxies compare in
  the candidate (the tests are testing its own ``__eq__``);
- an exception the candidate raises is raised here as the builtin class of that name, or for a
  class of its own as a local class (subclass of its nearest builtin base, made once per class),
  so ``pytest.raises(ValueError)`` and ``pytest.raises(mod.MyError)`` work and no class of the
  test process (pytest's skip or exit) can be named;
- what crosses either way is a node (``_crossing.py``): plain data, ``pathlib`` paths, dates,
  decimals and fractions rebuilt by the receiver's own classes, containers of these, and
  handles. A function the tests define (in a trusted file) or find by name crosses to the
  candidate as code (``code/sandboxed/_shipped_callables.py``: only the globals and closure it
  reads, each plain data, a function shipped the same way, or an object of the candidate's held
  here) and runs there: ``monkeypatch.setattr(module, "fetch", lambda url: ...)`` patches the
  candidate's module, and monkeypatch's undo sends the original back by its handle. Anything
  else of the tests, a ``unittest.mock`` object included, is refused (``CannotCross``, a
  TypeError whose message names the test and says why; the runner puts it in the verdict): the
  candidate never calls back into the test process. Plain lists, dicts and sets a call changes
  in place are changed here too.

The candidate process starts at the first import, with closed descriptors (only its own pipes),
after this process made itself non-dumpable. Standard library only.
"""

import builtins
import importlib
import json
import os
import subprocess
import sys
import types

from veriloop.verifiers.workspace.sandboxed._crossing import node_of, value_of  # sandbox: strip

_wire = importlib.import_module("_wire")  # written beside this script by the runner (standard library only)
_shipped = importlib.import_module("_shipped_callables")  # likewise

_NOT_RAISED_HERE = frozenset({"unittest.case", "bdb", "pdb"})
"""Modules whose exceptions pytest reads as an outcome (a skip, a debugger's quit), not a failure."""
_FORWARDED_DUNDERS = frozenset({"__all__", "__version__", "__name__", "__qualname__", "__doc__", "__wrapped__"})


class WorkspaceCodeUnreachable(RuntimeError):
    """The candidate process ended or answered nonsense: every later use fails the same way."""


class CannotCross(TypeError):
    """A value of the tests that cannot reach the workspace's code: its message names the test."""


class ModulesOfTheTests:
    """The names of the modules run from the trusted files: a function of theirs travels as its
    code, never as a name the candidate would import (and so run the tests' module there)."""

    def __init__(self, files):
        self.files = files

    def __contains__(self, name):
        file = getattr(sys.modules.get(name), "__file__", None)
        return type(file) is str and os.path.realpath(file) in self.files


class Candidate:
    """The candidate process and the requests sent to it (one at a time, in order)."""

    def __init__(self, script):
        self.script = script
        self.process = None
        self.proxies = {}
        self.mirrors = {}
        self.environ = None
        self.shipping = None  # encodes the tests' functions, once their files are known
        self.refusals = {}  # {test's node id: why a value of it could not cross}

    def ship_functions_of(self, files):
        """Functions defined in ``files`` (real paths of the trusted files) cross as their code."""
        self.shipping = _shipped.shipper(files=frozenset(files), unnamed=ModulesOfTheTests(files), held=_held_number)

    def refused(self, value, why):
        """The error failing the current test for ``value`` (recorded for the verdict)."""
        test = os.environ.get("PYTEST_CURRENT_TEST", "").rpartition(" (")[0] or "a test"
        message = "%s: the tests' %s cannot reach the workspace's code, which runs in a process of its own (%s)" % (
            test,
            type(value).__name__,
            why,
        )
        if type(value).__module__ == "unittest.mock":
            message += "; a unittest.mock object stays with the tests: patch with a function instead"
        self.refusals.setdefault(test, message)
        return CannotCross(message)

    def _started(self):
        if self.process is None:
            self.process = subprocess.Popen(
                [sys.executable, "-I", "-B", self.script],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                close_fds=True,
            )
        return self.process

    def request(self, op, target=None, **fields):
        """The value of one request: plain data, a proxy, or the candidate's exception raised."""
        process = self._started()
        live = fields.pop("live", [])
        message = dict(fields, op=op, target=target, cwd=os.getcwd())
        if dict(os.environ) != self.environ:  # monkeypatch.setenv reaches the code under test
            self.environ = dict(os.environ)
            message["environ"] = self.environ
        try:
            process.stdin.write(json.dumps(message).encode() + b"\n")
            process.stdin.flush()
            reply = json.loads(process.stdout.readline())
        except (OSError, ValueError) as error:
            raise WorkspaceCodeUnreachable("the workspace's process ended (%s)" % error) from None
        sys.stdout.write(reply.get("stdout", ""))
        sys.stderr.write(reply.get("stderr", ""))
        if "raised" in reply:
            raise self.exception(reply)
        self._apply_changes(reply.get("changed", []), live)
        return self.value(reply)

    def _apply_changes(self, changes, live):
        for position, encoded in changes:
            original, now = live[position], _wire.decode_value(encoded)
            if type(original) is list:
                original[:] = now
            elif type(original) in (dict, set):
                original.clear()
                original.update(now)

    def value(self, reply):
        """What a reply names, as the tests see it."""
        return value_of(reply["node"], self.resolve)

    def resolve(self, handle):
        """A handle's object here: a proxy (one per object), or an exception class's mirror."""
        if handle[0] == "exc":
            return self.mirror(handle[2]["chain"], handle[2]["builtin"])
        if handle[0] != "h" or type(handle[1]) is not int:
            raise ValueError("the workspace's process answered a %r node" % handle[0])
        number = handle[1]
        if number not in self.proxies:
            self.proxies[number] = Proxy(self, number)
        return self.proxies[number]

    def mirror(self, chain, builtin_name):
        """The local class standing for a candidate exception class (``chain``: most derived first)."""
        base = getattr(builtins, builtin_name, Exception)
        if not (isinstance(base, type) and issubclass(base, BaseException)):
            base = Exception
        if not chain:
            return base
        number, name, module = chain[0]
        if number not in self.mirrors and standard_exception(module, name) is not None:
            self.mirrors[number] = standard_exception(module, name)
        if number not in self.mirrors:
            parent = self.mirror(chain[1:], builtin_name)
            attributes = {"__module__": str(module), "__str__": _mirror_text, "__getattr__": _mirror_attribute}
            self.mirrors[number] = type(str(name).rpartition(".")[2] or "Error", (parent,), attributes)
        return self.mirrors[number]

    def exception(self, reply):
        """The exception to raise here for the candidate's (its arguments kept when plain)."""
        kind = self.mirror(reply["raised"]["chain"], reply["raised"]["builtin"])
        arguments = _wire.decode_value(reply["args"]) if reply.get("args") is not None else (reply["text"],)
        try:
            error = kind(*arguments)
        except Exception:  # a constructor wanting other arguments (JSONDecodeError's msg, doc, pos)
            error = kind.__new__(kind, *arguments)
            error.args = tuple(arguments)
        if kind in self.mirrors.values():
            error._text, error._candidate = reply["text"], self.resolve(["h", reply["instance"]])
        error.__notes__ = ["raised in the workspace's code:\n" + reply.get("traceback", "")]
        return error


def standard_exception(module, qualname):
    """The tests' own class for an exception class of the standard library that the tests have
    imported (``json.JSONDecodeError``), so ``pytest.raises`` on it works; else None."""
    if str(module).partition(".")[0] not in sys.stdlib_module_names or module in _NOT_RAISED_HERE:
        return None
    found = sys.modules.get(module)
    for part in str(qualname).split("."):
        found = getattr(found, part, None)
    if isinstance(found, type) and issubclass(found, BaseException) and found.__module__ == module:
        return found
    return None


def _mirror_text(error):
    return error.__dict__.get("_text", Exception.__str__(error))


def _mirror_attribute(error, name):
    candidate = error.__dict__.get("_candidate")
    if candidate is None or name.startswith("__"):
        raise AttributeError(name)
    return getattr(candidate, name)


def sent(value, candidate):
    """One argument as the candidate receives it (a node, ``_crossing.py``); raises CannotCross
    (a TypeError naming the test) for what cannot cross."""
    return node_of(value, lambda kept: _handle_here(kept, candidate))


def _held_number(value):
    """The candidate's number for one of its objects held here, else None."""
    if isinstance(value, Proxy):
        return object.__getattribute__(value, "_number")
    if isinstance(value, ModuleProxy):
        return value.__dict__["_number"]
    return None


def _handle_here(value, candidate):
    number = _held_number(value)
    if number is not None:
        return ["h", number]
    if callable(value) and candidate.shipping is not None:
        try:
            return ["fn", _wire.encode_value(value, 0, candidate.shipping)]
        except _wire.NotPlainData as why:
            raise candidate.refused(value, str(why)) from None
    why = "only plain data, paths, dates, decimals, the workspace's own objects and the tests' functions cross"
    raise candidate.refused(value, why)


def _call(candidate, number, op, args=(), **fields):
    live = list(args)
    return candidate.request(op, number, args=[sent(a, candidate) for a in live], live=live, **fields)


def _operator(name):
    def forward(self, *args):
        return _call(_candidate_of(self), _number_of(self), "operator", args, name=name)

    forward.__name__ = name
    return forward


def _candidate_of(proxy):
    return object.__getattribute__(proxy, "_candidate")


def _number_of(proxy):
    return object.__getattribute__(proxy, "_number")


def _typed(name, kind):
    def forward(self):
        result = _call(_candidate_of(self), _number_of(self), "operator", (), name=name)
        if type(result) is not kind and not (kind is int and type(result) is bool):
            raise TypeError("%s of a workspace object returned a %s" % (name, type(result).__name__))
        return result

    forward.__name__ = name
    return forward


def _ordering(name):
    def forward(self, other):
        if not isinstance(other, Proxy):
            raise TypeError("a workspace object is not ordered against plain data (%s)" % name)
        return _call(_candidate_of(self), _number_of(self), "operator", (other,), name=name)

    return forward


class Proxy:
    """An object of the candidate process, used from the tests (see the module's docstring)."""

    __slots__ = ("_candidate", "_number", "__weakref__")

    def __init__(self, candidate, number):
        object.__setattr__(self, "_candidate", candidate)
        object.__setattr__(self, "_number", number)

    def __getattr__(self, name):
        return _call(_candidate_of(self), _number_of(self), "getattr", name=name)

    def __setattr__(self, name, value):
        _call(_candidate_of(self), _number_of(self), "setattr", (value,), name=name)

    def __delattr__(self, name):
        _call(_candidate_of(self), _number_of(self), "delattr", name=name)

    def __call__(self, *args, **kwargs):
        candidate, live = _candidate_of(self), list(args)
        keywords = {name: sent(value, candidate) for name, value in kwargs.items()}
        arguments = [sent(a, candidate) for a in args]
        return candidate.request("call", _number_of(self), args=arguments, kwargs=keywords, live=live)

    def __eq__(self, other):
        if not isinstance(other, Proxy):
            return False
        return _call(_candidate_of(self), _number_of(self), "operator", (other,), name="__eq__")

    def __ne__(self, other):
        if not isinstance(other, Proxy):
            return True
        return _call(_candidate_of(self), _number_of(self), "operator", (other,), name="__ne__")

    def __instancecheck__(self, other):
        if not isinstance(other, Proxy):
            return False
        return _call(_candidate_of(self), _number_of(self), "operator", (other,), name="__instancecheck__") is True

    def __iter__(self):
        return _call(_candidate_of(self), _number_of(self), "operator", (), name="__iter__")

    def __dir__(self):
        return _call(_candidate_of(self), _number_of(self), "operator", (), name="__dir__")

    __lt__, __le__ = _ordering("__lt__"), _ordering("__le__")
    __gt__, __ge__ = _ordering("__gt__"), _ordering("__ge__")
    __len__, __hash__, __index__ = _typed("__len__", int), _typed("__hash__", int), _typed("__index__", int)
    __bool__, __str__, __repr__ = _typed("__bool__", bool), _typed("__str__", str), _typed("__repr__", str)
    __int__, __float__ = _typed("__int__", int), _typed("__float__", float)
    __contains__ = _operator("__contains__")


for _name in (
    "__next__ __getitem__ __setitem__ __delitem__ __add__ __sub__ __mul__ __truediv__ __floordiv__ __mod__ "
    "__pow__ __matmul__ __and__ __or__ __xor__ __lshift__ __rshift__ __radd__ __rsub__ __rmul__ __rtruediv__ "
    "__rfloordiv__ __rmod__ __rpow__ __neg__ __pos__ __abs__ __invert__ __enter__ __exit__ __round__ "
    "__reversed__"
).split():
    setattr(Proxy, _name, _operator(_name))


class ModuleProxy(types.ModuleType):
    """A module of the workspace: the import system's attributes (``__spec__``, submodules) are
    kept here, every other attribute is the candidate's module's."""

    def __init__(self, name, candidate, number):
        super().__init__(name)
        self.__dict__.update(_candidate=candidate, _number=number)

    def __getattr__(self, name):
        if name.startswith("__") and name not in _FORWARDED_DUNDERS or name.startswith("pytest_"):
            raise AttributeError(name)  # the import system's and pytest's questions stay here
        candidate, number = self.__dict__["_candidate"], self.__dict__["_number"]
        if name == "__all__":
            try:
                return candidate.request("getattr", number, name=name)
            except AttributeError:
                return candidate.request("names", number)
        value = candidate.request("getattr", number, name=name)
        if not name.startswith("__") and name not in type(self).__dict__:
            setattr(type(self), name, _Forwarded(name))
        return value

    def __setattr__(self, name, value):
        if name.startswith("__"):
            return super().__setattr__(name, value)  # the import system's: a spec, a loader
        if isinstance(value, types.ModuleType):
            self.__dict__[name] = value  # a submodule, kept here even where a _Forwarded name is
            return None
        self.__dict__.pop(name, None)
        _call(self.__dict__["_candidate"], self.__dict__["_number"], "setattr", (value,), name=name)

    def __delattr__(self, name):
        if name in self.__dict__:
            return super().__delattr__(name)
        _call(self.__dict__["_candidate"], self.__dict__["_number"], "delattr", name=name)


class _Forwarded:
    """An attribute of a workspace module that the tests have read, as a data descriptor of the
    module proxy's own class: tools that look for it in the module's ``__dict__`` before they
    patch it (pytest's monkeypatch, to know what its undo restores) find it there, living in
    the candidate, instead of taking it for absent and deleting it on undo."""

    def __init__(self, name):
        self.name = name

    def __get__(self, module, owner=None):
        return self if module is None else module.__getattr__(self.name)

    def __set__(self, module, value):
        module.__setattr__(self.name, value)

    def __delete__(self, module):
        module.__delattr__(self.name)


def imported(candidate, name):
    """The proxy of workspace module ``name``, imported in the candidate on this process's path
    (of a class of its own, which gathers its ``_Forwarded`` attributes)."""
    reply_number = candidate.request("import", None, name=name, path=list(sys.path))
    return type("ModuleProxy", (ModuleProxy,), {})(name, candidate, _number_of(reply_number))
