"""Functions the tests pass to the function under test, carried to the candidate's process.

``assert candidate(lambda x: x * 2, [1, 2]) == [2, 4]``, ``candidate(str.upper, words)``,
``sorted_by(items, key=len)``: the argument is the task's own code, trusted, and must run in
the candidate's process, beside the candidate's code that calls it. In a call key it is a
tagged form, ``{"$callable": [...]}``:

- ``["named", module, qualified name]``: a function or class that a module defines (``len``,
  ``str.upper``, ``math.sqrt``, ``os.path.basename``, ``int``), found again by name;
- ``["bound", encoded object, name]``: a built-in method of a plain value (``"-".join``);
- ``["module", name]``: a module a shipped function reads (``math`` in ``lambda x: math.sqrt(x)``);
- ``["function", interpreter tag, marshalled code, name, globals, closure, defaults, keyword
  defaults]``: a function or lambda the tests (or the prompt's code) define, its code object
  marshalled (format 2, which has no references that depend on reference counts, so the same
  function gives the same key in every run) with only the global names its code reads, each
  shipped the same way; ``{"$self": 0}`` in its globals is the function itself (recursion).

Anything else (the function under test itself, an object it returned, an instance of a
class, ``functools.partial``) cannot cross: encoding raises NotPlainData and the tests are
refused with the line that passed it (``veriloop tasks validate`` says so). Only what the
function's code reads crosses, so the candidate learns no expected output the function does
not itself contain.

Only the candidate's process rebuilds functions (``rebuilt``); the host and the test process
read a callable in a call key as a ``ShippedCallable`` (``described``), which runs nothing, and
a candidate's result holding the tag is refused as not plain data, like any unknown tag.

``shipped_form`` and ``rebuilt`` serve ``python_tests``, whose tests are compiled as
``<tests>``. ``shipper`` and ``rebuilder`` make the same pair for another test runner: the
files whose functions may be shipped (``workspace_tests``: the hidden test files and the
task's conftests, by real path), modules that are not found by name (the test modules
themselves), and ``["held", number]``, an object the receiving process already holds (a
function of the code under test that a shipped lambda calls), numbered by the sender's
``held(value)`` and found again by the receiver's ``held(number)``.

Standard library only: sent into the sandbox after ``_wire`` (whose names it uses).
"""

from veriloop.verifiers.code.sandboxed._wire import NotPlainData, decode_value, encode_value  # sandbox: strip

_FUNCTION_FILES = ("<tests>", "<prompt>")
_SELF = {"$self": 0}


def _interpreter():
    import sys

    return f"{sys.implementation.cache_tag}:{sys.version_info[0]}.{sys.version_info[1]}"


def _found(module, qualname):
    import importlib

    value = importlib.import_module(module)
    for part in qualname.split("."):
        value = getattr(value, part)
    return value


def _by_name(value, unnamed=frozenset()):
    """``["named", module, qualname]`` when importing ``module`` and walking ``qualname`` gives
    ``value`` itself, else None (always for a module of ``unnamed``)."""
    owner = getattr(value, "__objclass__", None)  # str.upper: a method of a built-in class
    module = getattr(owner if owner is not None else value, "__module__", None)
    qualname = getattr(value, "__qualname__", None)
    if type(module) is not str or type(qualname) is not str or "<" in qualname or module == "__tests__":
        return None
    if module in unnamed:
        return None
    try:
        return ["named", module, qualname] if _found(module, qualname) is value else None
    except Exception:
        return None


def _read_names(code):
    """The global names ``code`` (and the functions nested in it) reads: an attribute name
    (``x.expected``) is not one, so a global of that name stays behind."""
    import dis

    names = {i.argval for i in dis.get_instructions(code) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
    for constant in code.co_consts:
        if type(constant) is type(code):
            names |= _read_names(constant)
    return names


def _function(value, depth, form, files):
    import base64
    import marshal

    code = value.__code__
    if code.co_filename not in files:
        raise NotPlainData(f"the function {value.__name__!r} is not defined by the tests and cannot be found by name")
    shipped = []
    for name in sorted(_read_names(code)):
        if name in value.__globals__:
            bound = value.__globals__[name]
            shipped.append([name, _SELF if bound is value else encode_value(bound, depth + 1, form)])
    closure = [encode_value(cell.cell_contents, depth + 1, form) for cell in value.__closure__ or ()]
    defaults = encode_value(tuple(value.__defaults__ or ()), depth + 1, form)
    keyword_defaults = encode_value(dict(value.__kwdefaults__ or {}), depth + 1, form)
    text = base64.b64encode(marshal.dumps(code, 2)).decode("ascii")
    return ["function", _interpreter(), text, value.__name__, shipped, closure, defaults, keyword_defaults]


def shipper(files=_FUNCTION_FILES, unnamed=frozenset(), held=None):
    """The ``encode_value`` form of a callable the tests pass (see the module docstring):
    ``form(value, depth)``, which raises NotPlainData naming what cannot cross. ``files``: where
    the functions it ships are defined; ``unnamed``: modules it never names; ``held(value)``: the
    receiver's number for ``value``, or None."""

    def form(value, depth):
        import types

        number = held(value) if held is not None else None
        if number is not None:
            return {"$callable": ["held", number]}
        if type(value) is ShippedCallable:
            return {"$callable": value.body}
        if isinstance(value, types.ModuleType):
            if value.__name__ in unnamed:
                raise NotPlainData(f"the module {value.__name__!r} of the tests is not shipped")
            return {"$callable": ["module", value.__name__]}
        if not callable(value):
            raise NotPlainData(f"a {type(value).__name__} is not plain data")
        named = _by_name(value, unnamed)
        if named is not None:
            return {"$callable": named}
        owner = getattr(value, "__self__", None)
        if type(value) is types.BuiltinMethodType and owner is not None and not isinstance(owner, types.ModuleType):
            return {"$callable": ["bound", encode_value(owner, depth + 1), value.__name__]}
        if type(value) is types.FunctionType:
            return {"$callable": _function(value, depth, form, files)}
        raise NotPlainData(f"a {type(value).__name__} is not plain data and cannot be passed to the function")

    return form


shipped_form = shipper()
"""``python_tests``' form: functions of ``<tests>`` and ``<prompt>``."""


class ShippedCallable:
    """A callable of a call key, as the host and the test process see it: shown, never run."""

    __slots__ = ("body",)

    def __init__(self, body):
        self.body = body

    def __repr__(self):
        kind = self.body[0] if type(self.body) is list and self.body else None
        if kind in ("named", "module") and len(self.body) > 1:
            return str(self.body[-1])
        if kind == "function" and len(self.body) > 3:
            return "<lambda>" if self.body[3] == "<lambda>" else f"<function {self.body[3]}>"
        return "<function>"

    def __eq__(self, other):
        return type(other) is ShippedCallable and other.body == self.body

    def __hash__(self):
        return hash(repr(self))


def described(body, depth):
    """``decode_value``'s reading of a callable on the host and in the test process."""
    return ShippedCallable(body)


def rebuilder(held=None):
    """``decode_value``'s reading of a callable in the candidate's process: ``rebuilt(body,
    depth)``, the callable itself; ``held(number)`` finds a ``["held", number]`` object."""

    def rebuilt(body, depth):
        kind = body[0] if type(body) is list and body else None
        if kind == "held" and held is not None and len(body) == 2 and type(body[1]) is int:
            return held(body[1])
        if kind == "named":
            return _found(body[1], body[2])
        if kind == "module":
            import importlib

            return importlib.import_module(body[1])
        if kind == "bound":
            return getattr(decode_value(body[1], depth + 1), body[2])
        if kind != "function" or len(body) != 8:
            raise NotPlainData("malformed callable")
        return _rebuilt_function(body, depth, rebuilt)

    return rebuilt


def _rebuilt_function(body, depth, rebuilt):
    import base64
    import builtins
    import marshal
    import types

    if body[1] != _interpreter():
        raise NotPlainData(f"a function of the tests was compiled by {body[1]}; this interpreter is {_interpreter()}")
    code = marshal.loads(base64.b64decode(body[2]))
    namespace = {"__builtins__": builtins, "__name__": "__tests__"}
    closure = tuple(types.CellType(decode_value(item, depth + 1, rebuilt)) for item in body[5])
    if len(closure) != len(code.co_freevars):
        raise NotPlainData("malformed callable")
    function = types.FunctionType(code, namespace, body[3], decode_value(body[6], depth + 1, rebuilt) or None, closure)
    function.__kwdefaults__ = decode_value(body[7], depth + 1, rebuilt) or None
    for name, value in body[4]:
        namespace[name] = function if value == _SELF else decode_value(value, depth + 1, rebuilt)
    return function


rebuilt = rebuilder()
"""``python_tests``' reading: no object is held by number."""
