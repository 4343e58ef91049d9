"""What crosses between the test and candidate processes: nodes of JSON, never objects.

A node is ``["v", plain data]`` (``code/sandboxed/_wire.py``'s encoding, exact built-in types
only), ``["path", text]`` for a ``pathlib`` path, ``["value", name, parts]`` for a value of the
standard library that tests compare by value (below), a list, tuple, set, frozenset or dict of
nodes, or a handle that each side resolves its own way (``["h", number]``, ``["exc", number,
class]``, and ``["fn", shipped]``: a function of the tests, shipped to the candidate as
``code/sandboxed/_shipped_callables.py`` encodes it). Whatever arrives is built anew by the
receiver's own classes from the parts: nothing of the sender runs on the other side, but for a
function of the tests that the candidate rebuilds and runs beside the code it is passed to.

Dates, times, durations, decimals and fractions are compared by value in tests
(``assert parse("2024-01-02") == date(2024, 1, 2)``), so they cannot travel as handles, which
are never equal to a value of the tests. Only the exact classes qualify (a subclass could
compare as it likes), and a datetime or time only without a zone or with a fixed offset.

Sent into the sandbox in both scripts (standard library only).
"""

import datetime
import decimal
import fractions
import importlib
import pathlib

_wire = importlib.import_module("_wire")  # written beside this script by the runner (standard library only)
MAX_DEPTH = 32
_CONTAINERS = {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}


def _offset(value):
    zone = value.tzinfo
    if zone is None:
        return None
    if type(zone) is not datetime.timezone:
        raise TypeError("a time zone other than a fixed offset")
    return zone.utcoffset(None) // datetime.timedelta(microseconds=1)


def _zone(microseconds):
    return None if microseconds is None else datetime.timezone(datetime.timedelta(microseconds=microseconds))


def _date_time(value):
    parts = [value.year, value.month, value.day, value.hour, value.minute, value.second, value.microsecond]
    return parts + [_offset(value)]


VALUE_TYPES = {
    "date": (datetime.date, lambda v: [v.year, v.month, v.day], lambda p: datetime.date(*p)),
    "datetime": (datetime.datetime, _date_time, lambda p: datetime.datetime(*p[:7], tzinfo=_zone(p[7]))),
    "time": (
        datetime.time,
        lambda v: [v.hour, v.minute, v.second, v.microsecond, _offset(v)],
        lambda p: datetime.time(*p[:4], tzinfo=_zone(p[4])),
    ),
    "timedelta": (datetime.timedelta, lambda v: [v.days, v.seconds, v.microseconds], lambda p: datetime.timedelta(*p)),
    "Decimal": (decimal.Decimal, str, decimal.Decimal),
    "Fraction": (fractions.Fraction, lambda v: [v.numerator, v.denominator], lambda p: fractions.Fraction(*p)),
}
"""``name: (exact class, value -> JSON parts, parts -> value)``."""
_BY_CLASS = {kind: name for name, (kind, _, _) in VALUE_TYPES.items()}


def value_parts(value):
    """``[name, parts]`` for a value of one of ``VALUE_TYPES``, or None for anything else."""
    name = _BY_CLASS.get(type(value))
    if name is None:
        return None
    try:
        return [name, VALUE_TYPES[name][1](value)]
    except TypeError:
        return None


def value_from(name, parts):
    """The value ``value_parts`` described; raises ValueError on anything malformed."""
    if name not in VALUE_TYPES:
        raise ValueError("unknown value type %r" % name)
    try:
        return VALUE_TYPES[name][2](parts)
    except (TypeError, ValueError, ArithmeticError, OverflowError) as error:
        raise ValueError("malformed %s: %s" % (name, error)) from None


def node_of(value, handle_of, depth=0):
    """The node for ``value``; ``handle_of(value)`` gives the node of anything else (or raises)."""
    try:
        return ["v", _wire.encode_value(value)]
    except _wire.NotPlainData:
        pass
    parts = value_parts(value)
    if parts is not None:
        return ["value", *parts]
    if type(value) in (pathlib.PosixPath, pathlib.PurePosixPath):
        return ["path", str(value)]
    if depth < MAX_DEPTH and type(value).__name__ in _CONTAINERS and type(value) in _CONTAINERS.values():
        return [type(value).__name__, [node_of(item, handle_of, depth + 1) for item in value]]
    if depth < MAX_DEPTH and type(value) is dict:
        return ["dict", [node_of(part, handle_of, depth + 1) for pair in value.items() for part in pair]]
    return handle_of(value)


def value_of(node, object_of, depth=0):
    """The value a node names; ``object_of(node)`` resolves handles; ValueError when malformed."""
    if type(node) is not list or not node or depth > MAX_DEPTH:
        raise ValueError("malformed node")
    kind = node[0]
    if kind == "v":
        return _wire.decode_value(node[1])
    if kind in ("h", "exc", "fn"):
        return object_of(node)
    if kind == "path":
        return pathlib.Path(str(node[1]))
    if kind == "value":
        return value_from(node[1], node[2])
    items = [value_of(item, object_of, depth + 1) for item in node[1]]
    if kind in _CONTAINERS:
        return _CONTAINERS[kind](items)
    if kind == "dict":
        return dict(zip(items[::2], items[1::2]))
    raise ValueError("unknown node %r" % kind)
