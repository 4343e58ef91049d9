"""Plain data on the wire: the only thing that crosses between candidate, tests and host.

A value is encoded to JSON with exact types kept: lists stay lists, tuples, sets, dicts
with any hashable keys, bytes, complex numbers, huge integers and non-finite floats are
tagged objects (``{"$tuple": [...]}``), so ``(0, 1)`` never decodes as ``[0, 1]``. Only the
exact built-in types are accepted; a subclass (``class X(str)`` with an ``__eq__`` that is
always true) or any other object is refused, so nothing that runs code can cross. NumPy
scalars and arrays are converted to Python values first, as a courtesy to honest code.

This module is self-contained (standard library only): its source is also sent into the
sandboxed processes, where it encodes the candidate's results and decodes the inputs.
"""

import base64 as _base64
import json as _json
import math as _math

MAX_DEPTH = 64
_BIG_INT_BITS = 8000
_TAGS = ("$tuple", "$set", "$frozenset", "$dict", "$bytes", "$complex", "$float", "$int")


class NotPlainData(ValueError):
    """A value (or a part of it) that is not plain data; the message says which type."""


def _encode_number(value):
    if type(value) is int:
        if value.bit_length() > _BIG_INT_BITS:
            return {"$int": format(value, "x")}
        return value
    if _math.isfinite(value):
        return value
    return {"$float": repr(value)}


def encode_value(value, depth=0, other=None):
    """A JSON-ready form of ``value``; raises NotPlainData naming the first bad type.

    ``other(value, depth)``, when given, encodes what is not plain data (or raises): the test
    process ships the tests' functions so (``_shipped_callables``); nothing else passes it."""
    if depth > MAX_DEPTH:
        raise NotPlainData(f"nested deeper than {MAX_DEPTH} levels")
    kind = type(value)
    if value is None or kind is bool or kind is str:
        return value
    if kind is int or kind is float:
        return _encode_number(value)
    if kind is list:
        return [encode_value(item, depth + 1, other) for item in value]
    if kind is tuple:
        return {"$tuple": [encode_value(item, depth + 1, other) for item in value]}
    if kind is dict:
        pairs = [[encode_value(k, depth + 1, other), encode_value(v, depth + 1, other)] for k, v in value.items()]
        return {"$dict": pairs}
    if kind is set or kind is frozenset:
        items = sorted((encode_value(item, depth + 1, other) for item in value), key=_sort_key)
        return {"$set" if kind is set else "$frozenset": items}
    if kind is bytes:
        return {"$bytes": _base64.b64encode(value).decode("ascii")}
    if kind is complex:
        return {"$complex": [_encode_number(value.real), _encode_number(value.imag)]}
    if getattr(kind, "__module__", "") == "numpy":
        converted = value.tolist() if hasattr(value, "tolist") else value.item()
        if type(converted).__module__ != "numpy":
            return encode_value(converted, depth + 1)
    if other is not None:
        return other(value, depth)
    raise NotPlainData(f"a {_type_name(kind)} is not plain data")


def _sort_key(encoded):
    return _json.dumps(encoded, sort_keys=True)


def _type_name(kind):
    bases = [b.__name__ for b in kind.__mro__[1:] if b.__module__ == "builtins" and b is not object]
    name = f"{kind.__module__}.{kind.__qualname__}" if kind.__module__ != "builtins" else kind.__qualname__
    return f"{name} (a subclass of {bases[0]})" if bases else name


def decode_value(data, depth=0, callables=None):
    """The Python value of an encoded form; raises NotPlainData on anything malformed.

    A ``{"$callable": body}`` (a function the tests pass, in a call key) is read by
    ``callables(body, depth)`` when given, and is malformed otherwise: a candidate's result
    never holds one."""
    if depth > MAX_DEPTH:
        raise NotPlainData(f"nested deeper than {MAX_DEPTH} levels")
    kind = type(data)
    if data is None or kind in (bool, str, int, float):
        return data
    if kind is list:
        return [decode_value(item, depth + 1, callables) for item in data]
    if kind is not dict or len(data) != 1:
        raise NotPlainData("malformed encoded value")
    tag, body = next(iter(data.items()))
    if tag == "$float" and body in ("nan", "inf", "-inf"):
        return float(body)
    if tag == "$int" and type(body) is str:
        return int(body, 16)
    if tag == "$bytes" and type(body) is str:
        return _base64.b64decode(body.encode("ascii"), validate=True)
    if type(body) is not list:
        raise NotPlainData("malformed encoded value")
    if tag == "$callable" and callables is not None:
        return callables(body, depth)
    if tag == "$complex" and len(body) == 2:
        return complex(decode_value(body[0], depth + 1), decode_value(body[1], depth + 1))
    items = [decode_value(item, depth + 1, callables) for item in body] if tag != "$dict" else None
    try:
        if tag == "$tuple":
            return tuple(items)
        if tag == "$set":
            return set(items)
        if tag == "$frozenset":
            return frozenset(items)
        if tag == "$dict":
            return dict(_pair(pair, depth, callables) for pair in body)
    except TypeError as exc:
        raise NotPlainData(f"malformed encoded value ({exc})") from None
    raise NotPlainData(f"unknown tag {tag!r}")


def _pair(pair, depth, callables):
    if type(pair) is not list or len(pair) != 2:
        raise NotPlainData("malformed dict entry")
    return decode_value(pair[0], depth + 1, callables), decode_value(pair[1], depth + 1, callables)


def dumps_value(value, other=None):
    """Compact, canonical JSON text of ``value`` (equal values give equal text); ``other`` as
    for ``encode_value``."""
    return _json.dumps(encode_value(value, 0, other), sort_keys=True, separators=(",", ":"), allow_nan=False)


def loads_value(text, callables=None):
    """The value of ``dumps_value`` text; raises NotPlainData on malformed text; ``callables``
    as for ``decode_value``."""
    try:
        data = _json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise NotPlainData(f"not valid JSON ({exc})") from None
    return decode_value(data, 0, callables)


def _reject_constant(name):
    raise NotPlainData(f"bare {name} is not allowed")


def call_key(args, kwargs, other=None):
    """The canonical text naming one call's arguments; raises NotPlainData; ``other`` as for
    ``encode_value``."""
    return dumps_value([list(args), dict(sorted(kwargs.items()))], other)
