"""Runs inside the candidate's sandboxed process: define the program, call its function on
each input, and report each result as plain data (the host's side is ``code/_candidate_calls.py``).

The process receives only the program and the inputs (canonical call keys); expected outputs
never enter it. One frame per call is written as soon as the call returns, so results before
a crash, a timeout or an early exit survive and the host can resume after the culprit.

Sent into the sandbox after ``_wire`` and ``_channel`` (whose names it uses); the import
below is for readers and linters and is stripped from the script.
"""

from veriloop.verifiers.code.sandboxed._channel import describe_error, open_channel  # sandbox: strip
from veriloop.verifiers.code.sandboxed._wire import NotPlainData, dumps_value  # sandbox: strip
from veriloop.verifiers.code.sandboxed._wire import encode_value, loads_value  # sandbox: strip

CANDIDATE_FILE = "<candidate>"


def _call(function, key):
    args, kwargs = loads_value(key)
    watched = _mutable_arguments(args, kwargs)
    try:
        result = function(*args, **kwargs)
    except BaseException as exc:  # SystemExit and KeyboardInterrupt are answers too: wrong ones
        outcome = {"error": describe_error(exc, CANDIDATE_FILE), "raised": _class_names(exc)}
    else:
        try:
            outcome = {"value": encode_value(result)}
        except NotPlainData as exc:
            return {"error": f"returned {exc}; return plain values (numbers, strings, lists, ...)", "harness": True}
        except RecursionError:
            return {"error": "returned a value nested too deeply", "harness": True}
    try:
        mutated = _mutations(watched)
    except (NotPlainData, RecursionError) as exc:
        return {"error": f"left a non-plain value in an argument ({exc})", "harness": True}
    if mutated:
        outcome["mutated"] = mutated
    return outcome


_MUTABLE = (list, dict, set)


def _mutable_arguments(args, kwargs):
    """``[(position or keyword, argument, its encoded text)]`` for arguments a call can change."""
    pairs = [*enumerate(args), *kwargs.items()]
    return [(where, value, dumps_value(value)) for where, value in pairs if type(value) in _MUTABLE]


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
        return [name for name in names if type(name) is str][:16]
    except BaseException:
        return []


def run_candidate(job):
    """``job``: program, entry_point, calls (call keys), repeat (indices to call twice), nonce."""
    emit = open_channel(job["nonce"])
    calls, repeat = job["calls"], set(job.get("repeat", ()))
    namespace = {"__name__": "__candidate__"}
    try:
        exec(compile(job["program"], CANDIDATE_FILE, "exec"), namespace)
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
            again = _call(function, key)
            outcome["repeat_differs"] = again != outcome
        outcome["i"] = index
        emit(outcome)
