"""Reading a JSON answer of named figures, keeping what a lenient reader would hide.

``read_fields`` finds the answer's JSON object (a fenced ``json`` block, else an object
starting a line, inside the answer scope of ``_numeric``) and returns every key with every
number given for it and the unit it was given in; it counts the distinct answer objects, since
two different ones are two candidate answers. Nothing is collapsed: a key written twice
(``json.loads`` keeps only the last), a list of values or a string holding two numbers all
stay visible, so the verifier can refuse a hedge instead of picking the lucky reading; so does
a bound or an approximation written instead of a value (``">= 1,200"``, ``"about 1,234"``).

A value may be a number, a string holding one number (``"1,234"``, ``"(12)"``), or an object
``{"value": 1234, "unit": "thousands"}``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from veriloop.verifiers.answers._numeric_read import answer_scope, key_value_pairs, normalise_name, read_value

_FENCED_JSON = re.compile(r"```(?:json)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
_LINE_OBJECT = re.compile(r"^[ \t]*\{", re.MULTILINE)
_MAX_SCOPE_CHARS = 100_000
_MAX_STARTS = 20  # object starts tried, last first: bounds the work on hostile text
_UNITS = (
    ("millions", ("million", "mn", "m")),
    ("thousands", ("thousand", "k", "000")),
    ("percent", ("percent", "%", "pct")),
    ("ratio", ("ratio", "time", "x")),
    ("units", ("unit", "one")),
)


@dataclass(frozen=True)
class Reading:
    """One key of the answer as written: its numbers (exactly one when it is a clean value)."""

    key: str
    numbers: tuple[float, ...]
    unit: str | None = None  # normalised unit the answer names, if it names one
    unit_text: str | None = None  # the unit as written
    bound: str = ""  # the sign or words of a bound or approximation given instead of a value (">=", "about")


@dataclass(frozen=True)
class FieldAnswer:
    """The answer's fields by normalised name; ``found`` is False when no JSON object was found."""

    found: bool
    readings: dict[str, list[Reading]] = field(default_factory=dict)
    answers: int = 0  # distinct answer objects in the response: more than one is a hedge


def unit_of(text: str) -> str | None:
    """``"EUR thousands"`` -> ``"thousands"``; None when no known unit word is in ``text``."""
    words = {word.removesuffix("s") for word in re.findall(r"[a-z0-9]+|%", text.casefold())}
    for unit, spellings in _UNITS:
        if words & set(spellings):
            return unit
    return None


def _object(text: str) -> list[tuple[str, Any]] | None:
    try:
        value = json.loads(text, object_pairs_hook=key_value_pairs)
    except (ValueError, RecursionError):
        return None
    return value if _is_object(value) else None


def _is_object(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(p, tuple) for p in value)


def _candidates(scope: str) -> list[list[tuple[str, Any]]]:
    """Every answer object: the fenced JSON blocks, else each object that starts a line."""
    fenced = [_object(block.strip()) for block in _FENCED_JSON.findall(scope)]
    if any(obj is not None for obj in fenced):
        return [obj for obj in fenced if obj is not None]
    decoder = json.JSONDecoder(object_pairs_hook=key_value_pairs)
    found, end = [], 0
    for start in [m.end() - 1 for m in _LINE_OBJECT.finditer(scope)][:_MAX_STARTS]:
        if start < end:
            continue  # inside an object already read
        try:
            value, end = decoder.raw_decode(scope, start)
        except (ValueError, RecursionError):
            continue
        if _is_object(value):
            found.append(value)
    return found


def _numbers(value: Any) -> tuple[tuple[float, ...], str]:
    """The numbers a value holds, and the bound it states instead of a value ("" when none)."""
    if isinstance(value, bool) or value is None:
        return (), ""
    if isinstance(value, (int, float)):
        return (float(value),), ""
    if isinstance(value, str):
        reading = read_value(value)
        return reading.numbers, reading.bound
    if isinstance(value, list):
        # a nested object is a list of pairs; a JSON list is a list of values: both are hedges
        return tuple(n for item in value for n in (_numbers(item)[0] or (float("nan"),))), ""
    return (), ""


def _reading(key: str, value: Any) -> Reading:
    if value and _is_object(value):
        members = dict(value)
        if "value" in members and len(value) <= 3:
            unit_text = members.get("unit")
            unit_text = unit_text if isinstance(unit_text, str) else None
            numbers, bound = _numbers(members["value"])
            return Reading(key, numbers, unit_of(unit_text or ""), unit_text, bound)
        return Reading(key, ())
    numbers, bound = _numbers(value)
    return Reading(key, numbers, bound=bound)


def read_fields(response: str) -> FieldAnswer:
    """Every key of the answer's JSON object with its readings (see the module docstring)."""
    candidates = _candidates(answer_scope(response)[-_MAX_SCOPE_CHARS:])
    if not candidates:
        return FieldAnswer(found=False)
    pairs = candidates[-1]
    distinct = len({json.dumps(c, default=str) for c in candidates})
    readings: dict[str, list[Reading]] = {}
    for key, value in pairs:
        readings.setdefault(normalise_name(str(key)), []).append(_reading(str(key), value))
    return FieldAnswer(found=True, readings=readings, answers=distinct)
