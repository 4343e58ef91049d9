"""Reading function calls out of a model's answer, as JSON or as Python call syntax, never evaluated.

One answer gives one list of calls, written either way:

- JSON: a list of call objects, or one call object. A call object is ``{"name": N, "arguments":
  {...}}`` (``arguments`` may also be a string holding a JSON object, as OpenAI's API sends it),
  ``{"name": N, "parameters": {...}}``, BFCL's own ``{"function": N, "parameters": {...}}``, or an
  OpenAI tool call ``{"type": "function", "function": {"name": N, "arguments": ...}}``; ``id``
  and ``"type": "function"`` may stand beside any of them, nothing else.
- Python call syntax: ``[f(a=1), pkg.g(b="x")]``, or the calls without the brackets, read with
  ``ast`` and never evaluated. Arguments are named, and their values are literals: strings,
  numbers (a sign allowed), ``True``/``False``/``None``, lists, tuples (read as lists) and dicts
  with string keys.

Where the calls stand: the whole answer (surrounding whitespace and backticks aside), its one
fenced code block, or its ``<tool_call>...</tool_call>`` blocks (the calls of every block, in
order: one block per call is the usual way). Text around a fenced block or the tags is allowed,
but it may hold nothing that looks like another call: a name followed by ``(`` and a named
argument (``f(a=``), an offered function's name followed by ``()``, or a ``"name"``/``"function"``
key with a string value. Two call lists in one answer are a hedge, not an answer.

Refused with ``UnreadableCalls`` (its message says why, for the model): positional or ``**``
arguments; any expression as a value (``2+3``, a bare name, a call such as ``__import__("os")``,
a subscript, an f-string, a lambda); non-finite numbers; a key given twice in one object (JSON,
or a Python dict, or a keyword argument); JSON that is not standard (``NaN``);
two fenced blocks; nesting too deep to read.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from veriloop.verifiers.answers._json_schema import RefusedJson, json_decoder

_TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?(.*?)```", re.DOTALL)
_WHOLE_FENCE = re.compile(r"\A\s*```[A-Za-z0-9_-]*[ \t]*\n?(.*?)```\s*\Z", re.DOTALL)
_CALL_KEYS = {"name", "arguments", "parameters", "function", "type", "id"}
_READ_ERRORS = (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError)


@dataclass(frozen=True)
class Call:
    """One function call read from an answer: the function's name and its named arguments."""

    name: str
    arguments: dict[str, Any]


class UnreadableCalls(ValueError):
    """The answer holds no readable list of calls; the message says why, in words for the model."""


def read_calls(text: str, offered: Iterable[str] = ()) -> list[Call]:
    """The calls an answer makes, in order (see the module docstring); raises UnreadableCalls.
    ``offered``: the names of the task's functions, whose calls without arguments (``f()``) also
    count as a second call list in the text around the one read."""
    sources, rest = _sources(text)
    if rest and _call_fragment(rest, offered):
        raise UnreadableCalls("the text around the calls holds another call; give one list of calls and nothing else")
    return [call for source in sources for call in _read_source(source)]


def holds_call(text: str, offered: Iterable[str] = ()) -> bool:
    """Whether an answer calls a function in any form read here: a readable non-empty call list
    in the whole text, a fenced block or ``<tool_call>`` tags, or a call written inside prose."""
    candidates = [text, *_TOOL_CALL.findall(text), *_FENCE.findall(text)]
    for candidate in candidates:
        try:
            if _read_source(candidate):
                return True
        except UnreadableCalls:
            continue
    return "<tool_call>" in text or _call_fragment(text, offered)


def _sources(text: str) -> tuple[list[str], str]:
    """The pieces of ``text`` that hold the calls, and the text around them."""
    tags = _TOOL_CALL.findall(text)
    if tags:
        return tags, _TOOL_CALL.sub(" ", text)
    fences = _FENCE.findall(text)
    if len(fences) > 1:
        raise UnreadableCalls(f"the answer holds {len(fences)} code blocks; give all the calls in one")
    if fences:
        return fences, _FENCE.sub(" ", text)
    return [text], ""


_CALL_FRAGMENTS = (
    re.compile(r"(?<![\w.])[A-Za-z_][\w.]*\s*\(\s*[A-Za-z_]\w*\s*=(?!=)"),  # f(a=... in Python
    re.compile(r'"(?:name|function)"\s*:\s*"'),  # {"name": "f", ... in JSON
)


def _call_fragment(text: str, offered: Iterable[str]) -> bool:
    """Whether ``text`` writes a call with a named argument (``f(a=``), a JSON call object's name,
    or a call of an offered function without arguments (``f()``)."""
    if any(pattern.search(text) for pattern in _CALL_FRAGMENTS):
        return True
    return any(re.search(rf"(?<![\w.]){re.escape(name)}\s*\(\s*\)", text) for name in offered)


def _read_source(source: str) -> list[Call]:
    whole = _WHOLE_FENCE.match(source)
    body = (whole.group(1) if whole else source).strip().strip("`").strip()
    if not body:
        raise UnreadableCalls("the answer holds no calls")
    if body[0] in "[{":
        try:
            value = json_decoder().decode(body)
        except RefusedJson as exc:
            raise UnreadableCalls(f"the JSON is not standard: {exc}") from None
        except _READ_ERRORS:
            value = None
        else:
            return _json_calls(value)
    return _python_calls(body)


# ---- JSON ---------------------------------------------------------------------------------


def _json_calls(value: Any) -> list[Call]:
    items = value if isinstance(value, list) else [value]
    return [_json_call(item) for item in items]


def _json_call(item: Any) -> Call:
    if not isinstance(item, dict):
        raise UnreadableCalls('each call must be an object such as {"name": "f", "arguments": {...}}')
    unknown = sorted(set(item) - _CALL_KEYS)
    if unknown or item.get("type", "function") != "function":
        shown = unknown[0] if unknown else "type"
        raise UnreadableCalls(f"a call object has the unexpected key {shown!r}")
    if isinstance(item.get("function"), dict):
        inner = item["function"]
        if set(item) - {"function", "type", "id"} or set(inner) - {"name", "arguments"}:
            raise UnreadableCalls("an OpenAI tool call holds only type, id and function {name, arguments}")
        return _named_call(inner.get("name"), inner.get("arguments", {}))
    if "function" in item:
        if "name" in item or "arguments" in item:
            raise UnreadableCalls('a call object names its function once, with "name" or "function"')
        return _named_call(item["function"], item.get("parameters", {}))
    if "arguments" in item and "parameters" in item:
        raise UnreadableCalls('a call object gives its arguments once, under "arguments" or "parameters"')
    return _named_call(item.get("name"), item.get("arguments", item.get("parameters", {})))


def _named_call(name: Any, arguments: Any) -> Call:
    if not isinstance(name, str) or not name:
        raise UnreadableCalls("a call object has no function name")
    if isinstance(arguments, str):
        try:
            arguments = json_decoder().decode(arguments)
        except RefusedJson as exc:
            raise UnreadableCalls(f"the arguments of {name} are not standard JSON: {exc}") from None
        except _READ_ERRORS:
            raise UnreadableCalls(f"the arguments of {name} are a string that is not a JSON object") from None
    if not isinstance(arguments, dict):
        raise UnreadableCalls(f"the arguments of {name} must be an object of named values")
    return Call(name, arguments)


# ---- Python call syntax -------------------------------------------------------------------


def _python_calls(body: str) -> list[Call]:
    wrapped = body if body.startswith("[") else f"[{body}"
    wrapped = wrapped if wrapped.endswith("]") else f"{wrapped}]"
    try:
        tree = ast.parse(wrapped, mode="eval")
    except _READ_ERRORS as exc:
        reason = exc.msg if isinstance(exc, SyntaxError) else type(exc).__name__
        raise UnreadableCalls(f"not JSON and not Python call syntax ({reason})") from None
    if not isinstance(tree.body, ast.List):
        raise UnreadableCalls("give the calls as one list, such as [f(a=1), g(b='x')]")
    return [_python_call(node) for node in tree.body.elts]


def _dotted(node: ast.expr) -> str | None:
    """``a.b.c`` for a name or a chain of attributes on a name, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def _python_call(node: ast.expr) -> Call:
    if not isinstance(node, ast.Call):
        raise UnreadableCalls("every item of the list must be a call such as f(a=1)")
    name = _dotted(node.func)
    if name is None:
        raise UnreadableCalls("a call must name its function directly, such as f(...) or pkg.f(...)")
    if node.args:
        raise UnreadableCalls(f"{name}: name every argument (a=1), none may be positional")
    arguments = {}
    for keyword in node.keywords:
        if keyword.arg is None:
            raise UnreadableCalls(f"{name}: name every argument; ** is not read")
        if keyword.arg in arguments:
            raise UnreadableCalls(f"{name}: the argument {keyword.arg!r} is given more than once")
        arguments[keyword.arg] = _literal(keyword.value, f"{name}({keyword.arg}=...)")
    return Call(name, arguments)


def _literal(node: ast.expr, where: str) -> Any:
    """The plain value a literal stands for; UnreadableCalls for anything that would need evaluating."""
    if isinstance(node, ast.Constant) and _plain_constant(node.value):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        operand = node.operand
        if isinstance(operand, ast.Constant) and type(operand.value) in (int, float) and _plain_constant(operand.value):
            return -operand.value if isinstance(node.op, ast.USub) else operand.value
    if isinstance(node, (ast.List, ast.Tuple)) and not any(isinstance(e, ast.Starred) for e in node.elts):
        return [_literal(element, where) for element in node.elts]
    if isinstance(node, ast.Dict):
        return _literal_dict(node, where)
    raise UnreadableCalls(f"{where}: a value must be a literal (a string, number, list or dict), not an expression")


def _plain_constant(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return value is None or isinstance(value, (str, bool, int))


def _literal_dict(node: ast.Dict, where: str) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for key, item in zip(node.keys, node.values):
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            raise UnreadableCalls(f"{where}: dict keys must be strings")
        if key.value in value:
            raise UnreadableCalls(f"{where}: the key {key.value[:80]!r} appears more than once")
        value[key.value] = _literal(item, where)
    return value


def call_json(calls: Iterable[Call]) -> str:
    """Calls in the canonical JSON form, ``[{"name": ..., "arguments": {...}}]``."""
    return json.dumps([{"name": call.name, "arguments": call.arguments} for call in calls], ensure_ascii=False)
