"""BFCL's rules for one argument of one call: its type, then its value among the accepted ones.

These follow ``bfcl_eval/eval_checker/ast_eval/ast_checker.py`` (bfcl-eval 2026.3.23) for Python:

- Types map as BFCL's ``PYTHON_TYPE_MAPPING`` does (``string``/``any``: str, ``integer``: int,
  ``float``: float, ``boolean``: bool, ``array``/``tuple``: list, ``dict``: dict). A bool is never
  an int. An int given for a ``float`` parameter counts as that float (BFCL's one leniency); inside
  a list it does not, as in BFCL. A list's items are checked against the item type, one level deep.
- When the accepted values are of another type than the declared one (BFCL writes a variable's
  name, or ``None``, there), a value of the accepted values' type is checked as they are.
- Strings compare after BFCL's normalisation: spaces and ``,./-_*^`` removed, lower case, ``'``
  read as ``"``; so do the string items of a list and the string values of a dict.
- A dict matches an accepted dict when each of its keys is accepted with a matching value and
  every accepted key it leaves out may be left out; a list of dicts matches item by item.

Where this is stricter than BFCL: ``""`` among the accepted values of an optional parameter says
the argument may be left out, and a given ``""`` never matches it (BFCL lets ``unit=""`` stand for
leaving ``unit`` out; for a required parameter ``""`` stays a value, as BFCL's data means it);
numbers never equal booleans inside a list or a dict (Python's ``1 == True`` does in BFCL's).
"""

from __future__ import annotations

import re
from typing import Any

from veriloop.verifiers.answers._json_schema import json_equal

PYTHON_TYPES: dict[str, type] = {
    "string": str,
    "integer": int,
    "float": float,
    "boolean": bool,
    "array": list,
    "tuple": list,
    "dict": dict,
    "any": str,
}
"""BFCL's declared parameter types and the Python type a value must have."""

OMITTED = ""
"""Among the accepted values: the argument may be left out."""

_PUNCTUATION = re.compile(r"[ ,./\-_*^]")


def standard_string(text: str) -> str:
    """BFCL's ``standardize_string``: no spaces or ``,./-_*^``, lower case, ``'`` as ``"``."""
    return _PUNCTUATION.sub("", text).lower().replace("'", '"')


def _standard(value: Any) -> Any:
    return standard_string(value) if isinstance(value, str) else value


def _accepted_type(accepted: list[Any]) -> type | None:
    return next((type(item) for item in accepted if not _is_omitted(item)), None)


def _is_omitted(item: Any) -> bool:
    return isinstance(item, str) and item == OMITTED


def type_problem(value: Any, accepted: list[Any], declared: type, items: type | None) -> tuple[bool, bool]:
    """``(type fits, read as a variable)`` as BFCL's ``type_checker`` decides them."""
    answer_type = _accepted_type(accepted)
    variable = answer_type is not None and answer_type is not declared
    if type(value) is declared:
        if items is None:
            return True, variable
        for candidate in accepted:
            if type(candidate) is list and not all(type_problem(v, candidate, items, None)[0] for v in value):
                continue
            return True, variable
        return False, False  # BFCL's nested failure stands whatever the accepted values' type
    if answer_type is not None and type(value) is answer_type:
        return True, True
    return False, False


def _among(value: Any, accepted: list[Any]) -> bool:
    return any(json_equal(value, item) for item in accepted)


def _dict_fits(value: dict[str, Any], accepted: dict[str, Any]) -> bool:
    for key, item in value.items():
        options = accepted.get(key)
        if not isinstance(options, list):
            return False
        if not _among(_standard(item), [_standard(o) for o in options if not _is_omitted(o)]):
            return False
    return all(key in value or OMITTED in options for key, options in accepted.items() if isinstance(options, list))


def value_fits(value: Any, given: list[Any], declared: type, items: type | None, variable: bool) -> bool:
    """Whether ``value`` (of a fitting type) is among the ``given`` accepted values, as BFCL compares them."""
    if variable:
        return _among(value, given)
    if declared is dict:
        return any(isinstance(option, dict) and _dict_fits(value, option) for option in given)
    if declared is list and items is dict:
        return any(
            isinstance(option, list)
            and len(option) == len(value)
            and all(isinstance(v, dict) and isinstance(o, dict) and _dict_fits(v, o) for v, o in zip(value, option))
            for option in given
        )
    if declared is str:
        return _among(standard_string(value), [_standard(item) for item in given if isinstance(item, str)])
    if declared is list:
        standard = [_standard(item) for item in value]
        return _among(standard, [[_standard(i) for i in o] for o in given if isinstance(o, list)])
    return _among(value, given)


def argument_problem(name: str, value: Any, spec: dict[str, Any], accepted: list[Any], required: bool) -> str | None:
    """What is wrong with argument ``name`` = ``value`` of a parameter declared as ``spec``, or None
    (``required``: whether the function requires it, which makes ``""`` a value, not a mark).

    The words never show the accepted values: they are the task's answer."""
    declared_name = spec.get("type", "any")
    declared = PYTHON_TYPES[declared_name]
    item_spec = spec.get("items") if declared_name in ("array", "tuple") else None
    items = PYTHON_TYPES.get(item_spec.get("type", "")) if isinstance(item_spec, dict) else None
    if declared_name == "float" and type(value) is int:
        value = float(value)
    fits, variable = type_problem(value, accepted, declared, items)
    if not fits:
        inner = f" of {item_spec.get('type')}" if items is not None else ""
        return f"argument {name!r} should be {declared_name}{inner}, not {_kind(value)}"
    given = accepted if required else [item for item in accepted if not _is_omitted(item)]
    if not value_fits(value, given, declared, items, variable):
        return f"argument {name!r} has a value that does not answer the request"
    return None


def _kind(value: Any) -> str:
    names = {str: "a string", bool: "a boolean", int: "an integer", float: "a float", list: "a list", dict: "a dict"}
    return names.get(type(value), "null")
