"""Runs inside the candidate's sandboxed process: define the program, call its function on
each input, and report each result as plain data (the host's side is ``code/_candidate_calls.py``).

The process receives only the program and the inputs (canonical call keys); expected outputs
never enter it. One frame per call is written as soon as the call returns, so results before
a crash, a timeout or an early exit survive and the host can resume after the culprit.

Sent into the sandbox after ``_wire``, ``_channel`` and ``_shipped_callables`` (whose names it uses); the import
below is for readers and linters and is stripped from the script.
"""

from veriloop.verifiers.code.sandboxed._channel import describe_error, open_channel  # sandbox: strip
from veriloop.verifiers.code.sandboxed._shipped_callables import rebuilt  # sandbox: strip
from veriloop.verifiers.code.sandboxed._wire import NotPlainData, dumps_value  # sandbox: strip
from veriloop.verifiers.code.sandboxed._wire import encode_value, loads_value  # sandbox: strip

CANDIDATE_FILE = "<candidate>"


def _call(function, key):
    try:
        data = loads_value(key, rebuilt)  # functions the tests pass are rebuilt here, beside the candidate
    except Exception as exc:
        return {"error": f"could not receive the tests' arguments ({describe_error(exc)})", "harness": True}
    if type(data[0]) is str:  # ["$ops", base call key, operations]: a use of a returned object
        return _operate(function, data[1], data[2])
    args, kwargs = data
    watched = _mutable_arguments(args, kwargs)
    try:
        result = function(*args, **kwargs)
    except BaseException as exc:  # SystemExit and KeyboardInterrupt are answers too: wrong ones
        outcome = {"error": describe_error(exc, CANDIDATE_FILE), "raised": _class_names(exc)}
    else:
        outcome = _result(result)
        if "harness" in outcome:
            return outcome
    try:
        mutated = _mutations(watched)
    except (NotPlainData, RecursionError) as exc:
        return {"error": f"left a non-plain value in an argument ({exc})", "harness": True}
    if mutated:
        outcome["mutated"] = mutated
    return outcome


_MAX_ITEMS = 10000
_MAX_ITEMS_TEXT = 1 << 18  # characters of a generator's items kept, well inside the output limit
_VALUE_TYPES = (int, float, complex, str, bytes, bytearray, list, tuple, dict, set, frozenset)


def _result(result):
    """The outcome of a returned value: plain data; or, for an iterator (a generator), its
    items (at most ``_MAX_ITEMS``, or about ``_MAX_ITEMS_TEXT`` characters of them); or, for another object (a closure, an instance of the
    answer's class), a handle the tests use through further calls. An object posing as a
    value (a subclass of int, str, list, ...) is refused: its comparisons would be its own."""
    try:
        return {"value": encode_value(result)}
    except NotPlainData as exc:
        refused = exc
    except RecursionError:
        return {"error": "returned a value nested too deeply", "harness": True}
    kind = type(result)
    if any(issubclass(kind, base) for base in _VALUE_TYPES):
        return {"error": f"returned {refused}; return plain values (numbers, strings, lists, ...)", "harness": True}
    if hasattr(kind, "__next__") and hasattr(kind, "__iter__"):
        items, size = [], 0
        try:
            for item in result:
                if len(items) == _MAX_ITEMS or size > _MAX_ITEMS_TEXT:
                    return {"iterator": items, "complete": False}
                items.append(encode_value(item))
                size += len(dumps_value(item))
        except (NotPlainData, RecursionError) as exc:
            return {"error": f"yielded a value that is not plain data ({exc})", "harness": True}
        except BaseException as exc:
            return {"iterator": items, "complete": True, "error": describe_error(exc, CANDIDATE_FILE)}
        return {"iterator": items, "complete": True}
    return {"object": {"callable": callable(result)}}


def _operate(function, base, operations):
    """Replay a returned object's uses in order (``[target, kind, payload]``: target -1 is the
    base call's result, i the result of use i) and give the outcome of the last one. Earlier
    uses that raised raised in the tests too, which carried on; so does the replay."""
    args, kwargs = loads_value(base, rebuilt)
    results = []
    try:
        results.append(function(*args, **kwargs))
        for number, (target, kind, payload) in enumerate(operations):
            subject = results[target + 1]
            if number < len(operations) - 1:
                try:
                    results.append(_use(subject, kind, payload))
                except Exception:
                    results.append(None)
            else:
                return _result(_use(subject, kind, payload))
    except BaseException as exc:
        return {"error": describe_error(exc, CANDIDATE_FILE), "raised": _class_names(exc)}
    return {"error": "no use of the object was asked for", "harness": True}


def _use(subject, kind, payload):
    if kind == "call":
        return subject(*payload[0], **payload[1])
    if kind == "attr" and type(payload) is str and not payload.startswith("__"):
        return getattr(subject, payload)
    if kind == "item":
        return subject[payload]
    if kind == "contains":
        return payload in subject
    functions = {"len": len, "iter": iter, "bool": bool, "str": str, "repr": repr}
    if kind in functions:
        return functions[kind](subject)
    raise TypeError(f"unsupported use {kind!r}")


_MUTABLE = (list, dict, set)


def _mutable_arguments(args, kwargs):
    """``[(position or keyword, argument, its encoded text)]`` for arguments a call can change
    (plain data only: a list of the tests' functions is not watched)."""
    watched = []
    for where, value in [*enumerate(args), *kwargs.items()]:
        if type(value) in _MUTABLE:
            try:
                watched.append((where, value, dumps_value(value)))
            except NotPlainData:
                continue
    return watched


def _mutations(watched):
    """``[[position or keyword, encoded value]]`` of the arguments the call changed in place,
    so tests that look at an argument after the call see what the candidate did to it."""
    changed = []
    for where, value, before in watched:
        if dumps_value(value) != before:
            changed.append([where, encode_value(value)])
    return changed


def _class_names(exc):
    """The names of the exception's classes, its own first (``["MyError", "ValueError", ...]``),
    so the tests can catch it by any of them. Names only: plain strings, never the classes."""
    try:
        names = [klass.__name__ for klass in type(exc).__mro__]
        return [name[:100] for name in names if type(name) is str][:16]
    except BaseException:
        return []


def run_candidate(job):
    """``job``: program, entry_point, calls (call keys), repeat (indices to call twice), nonce,
    and stderr (true: leave the program's stderr to the host, which reads it)."""
    emit = open_channel(job["nonce"], keep_stderr=job.get("stderr", False))
    calls, repeat = job["calls"], set(job.get("repeat", ()))
    namespace = {"__name__": "__candidate__"}
    try:
        exec(compile(job["program"], CANDIDATE_FILE, "exec", dont_inherit=True), namespace)
    except BaseException as exc:
        emit({"load_error": describe_error(exc, CANDIDATE_FILE)})
        return
    function = namespace.get(job["entry_point"])
    if not callable(function):
        emit({"load_error": f"the program does not define a function named {job['entry_point']!r}"})
        return
    emit({"loaded": True})
    for index, key in enumerate(calls):
        outcome = _call(function, key)
        if index in repeat:
            outcome["again"] = _call(function, key)  # compared on the host, where nothing of this process runs
        outcome["i"] = index
        emit(outcome)
