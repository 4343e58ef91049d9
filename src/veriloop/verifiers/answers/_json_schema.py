"""The ``json_schema`` verifier kind: the answer is JSON that satisfies a JSON Schema.

The JSON is read from the last fenced code block if the response has one, else from the whole
response, else from the last complete ``{...}`` or ``[...]`` value in it (``extract`` picks one
of these). With ``match_gold`` the value must also equal the task's gold (a JSON value, or a
string holding one), as JSON values: ``36.0`` equals ``36``, but ``true`` never equals ``1``
and ``"36"`` never equals ``36``. Validation uses the schema's own draft (2020-12 when it names none);
``format`` keywords are annotations only, as the standard says by default. Validation runs in
the killable check pool (``_json_schema_check.py``): a schema's ``pattern`` is a regular
expression, and a crafted string can make it backtrack for hours; a validation that passes
``VALIDATION_TIMEOUT_S`` fails the answer.

Only standard JSON (RFC 8259) is read: ``NaN``, ``Infinity`` and numbers too large for a float
(which Python would read as infinite) are refused, since a non-finite number satisfies no
numeric bound yet slips past ``minimum``/``maximum`` checks; an object that repeats a key is
refused rather than read as its last value, since readers disagree on which copy wins.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator

from veriloop.core import Task
from veriloop.verifiers._registry import GraderError, Verdict, VerifierConfig, register_verifier
from veriloop.verifiers.answers._check_pool import CheckTimeout, shared_pool

JSON_SCHEMA_CHECK = "veriloop.verifiers.answers._json_schema_check:validate_json"
VALIDATION_TIMEOUT_S = 5.0
"""Hard wall-clock limit of one validation; past it the answer fails."""

_FENCED = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n(.*?)```", re.DOTALL)
_BRACKETS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')  # a JSON string (passed over whole) or a bracket
_NOT_JSON = object()


class RefusedJson(ValueError):
    """JSON that Python's reader would accept but the standard does not: the answer scores 0."""


def _refuse_constant(name: str) -> Any:
    raise RefusedJson(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise RefusedJson(f"the number {text[:40]} is too large to represent")
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        repeated = next(key for key, _ in pairs if key in seen or seen.add(key))
        raise RefusedJson(f"the key {repeated[:80]!r} appears more than once in one object")
    return value


_DECODER = json.JSONDecoder(parse_float=_finite_float, parse_constant=_refuse_constant, object_pairs_hook=_unique_keys)


def json_decoder() -> json.JSONDecoder:
    """The reader of standard JSON used here: it raises RefusedJson for NaN, Infinity, numbers too
    large for a float and a key repeated in one object."""
    return _DECODER


class JsonSchemaConfig(VerifierConfig):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    json_schema: dict[str, Any] = Field(alias="schema", description="the JSON Schema the answer must satisfy")
    extract: Literal["auto", "full", "fenced", "last_value"] = Field(
        default="auto", description="where the JSON is read from (auto: fenced block, whole text, last value)"
    )
    match_gold: bool = Field(default=False, description="the value must also equal the task's gold")
    max_chars: int = Field(default=200_000, ge=1, description="longer responses score 0 unread")

    @field_validator("json_schema")
    @classmethod
    def _valid_schema(cls, schema: dict[str, Any]) -> dict[str, Any]:
        from jsonschema import exceptions, validators

        try:
            validators.validator_for(schema).check_schema(schema)
        except exceptions.SchemaError as exc:
            raise ValueError(f"not a valid JSON Schema: {exc.message}") from None
        return schema


def _loads(text: str) -> Any:
    """The JSON value of ``text``, or ``_NOT_JSON``; raises RefusedJson for non-standard JSON."""
    try:
        return _DECODER.decode(text)
    except RefusedJson:
        raise
    except (ValueError, RecursionError):
        return _NOT_JSON


def _past_value(text: str, start: int) -> int:
    """The index just past the bracket that closes the one at ``start`` (brackets inside JSON
    strings skipped; any closing bracket counts), or the end of ``text`` when none does."""
    depth = 0
    for token in _BRACKETS.finditer(text, start):
        bracket = token.group()
        if bracket in ("[", "{"):
            depth += 1
        elif bracket in ("]", "}"):
            depth -= 1
            if depth == 0:
                return token.end()
    return len(text)


def _last_value(text: str) -> Any:
    """The last complete JSON object or array in ``text`` that is not inside another.

    A value nested too deeply to read is passed over whole, with everything inside it: starting
    again at each of its brackets would cost the reader's whole depth at every one of them."""
    found, index = _NOT_JSON, 0
    while True:
        starts = [i for i in (text.find("{", index), text.find("[", index)) if i >= 0]
        if not starts:
            return found
        start = min(starts)
        try:
            value, end = _DECODER.raw_decode(text, start)
        except RefusedJson:
            raise
        except RecursionError:
            index = _past_value(text, start)
            continue
        except ValueError:
            index = start + 1
            continue
        found, index = value, end


def extract_json(response: str, extract: str) -> Any:
    """The JSON value a response gives, or ``_NOT_JSON`` (see JsonSchemaConfig.extract).

    Raises RefusedJson when that value is not standard JSON (see the module docstring).
    """
    if extract in ("auto", "fenced"):
        blocks = _FENCED.findall(response)
        if blocks:
            return _loads(blocks[-1])
        if extract == "fenced":
            return _NOT_JSON
    if extract in ("auto", "full"):
        value = _loads(response.strip())
        if value is not _NOT_JSON or extract == "full":
            return value
    return _last_value(response)


def json_equal(value: Any, expected: Any) -> bool:
    """Whether two JSON values are the same, as JSON means it: numbers equal in value match
    (``36`` is ``36.0``), while a boolean is never a number (``true`` is not ``1``, as Python's
    ``==`` would have it) and a string is never a number."""
    if isinstance(value, bool) or isinstance(expected, bool):
        return type(value) is type(expected) and value == expected
    if isinstance(value, (int, float)) and isinstance(expected, (int, float)):
        return value == expected
    if isinstance(value, list) and isinstance(expected, list):
        return len(value) == len(expected) and all(json_equal(a, b) for a, b in zip(value, expected))
    if isinstance(value, dict) and isinstance(expected, dict):
        return value.keys() == expected.keys() and all(json_equal(value[k], expected[k]) for k in expected)
    return type(value) is type(expected) and value == expected


def _where(path: Any) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


@register_verifier("json_schema", JsonSchemaConfig)
def check_json_schema(config: JsonSchemaConfig, task: Task, response: str) -> Verdict:
    """Full credit when the answer's JSON satisfies the schema (and equals the gold if asked)."""
    if len(response) > config.max_chars:
        return Verdict(
            0.0,
            False,
            detail=f"response longer than {config.max_chars} characters",
            feedback="The answer is too long; give only the JSON.",
        )
    try:
        value = extract_json(response, config.extract)
    except RefusedJson as exc:
        return Verdict(
            0.0,
            False,
            detail=f"not standard JSON: {exc}",
            feedback=f"The answer is not standard JSON: {exc}.",
        )
    if value is _NOT_JSON:
        return Verdict(
            0.0,
            False,
            detail="no JSON value found",
            feedback="No valid JSON found. Give the answer as one JSON value in a ```json block.",
        )
    try:
        value_text = json.dumps(value)
    except RecursionError:
        value_text = None
    if value_text is None:
        return Verdict(
            0.0, False, detail="JSON too deeply nested to validate", feedback="The JSON is nested too deeply."
        )
    request = {"schema": json.dumps(config.json_schema, sort_keys=True), "value": value_text}
    try:
        found = shared_pool(JSON_SCHEMA_CHECK).call(request, VALIDATION_TIMEOUT_S)
    except CheckTimeout:
        return Verdict(
            0.0,
            False,
            detail=f"schema validation ran past {VALIDATION_TIMEOUT_S:g} s and was stopped",
            feedback="The JSON could not be checked against the schema in time.",
        )
    if found.get("too_deep"):
        return Verdict(
            0.0, False, detail="JSON too deeply nested to validate", feedback="The JSON is nested too deeply."
        )
    count = found["count"]
    if count:
        shown = "; ".join(f"at {_where(e['path'])}: {e['message']}" for e in found["errors"])
        more = f" (and {count - 3} more)" if count > 3 else ""
        return Verdict(
            0.0,
            False,
            detail=f"{count} schema violation(s): {shown}{more}",
            feedback=f"The JSON does not match the required schema: {shown}{more}.",
        )
    if config.match_gold:
        gold = task.gold
        if gold is None:
            raise GraderError("json_schema with match_gold needs a task gold")
        expected = _loads(gold) if isinstance(gold, str) else gold
        if expected is _NOT_JSON:
            raise GraderError("the task's gold is a string that is not JSON")
        if not json_equal(value, expected):
            return Verdict(
                0.0,
                False,
                detail="valid JSON, but different from the gold value",
                feedback="The JSON has the right shape but the wrong content.",
            )
    return Verdict(1.0, True, detail="JSON satisfies the schema", feedback="Correct.")
