"""The ``numeric`` verifier kind: named values read from an answer, each within a tolerance.

The document- and table-extraction domain: a task names the values it wants (``revenue_2023``,
``gross_margin_q3``) and their gold numbers; the answer gives each as ``name: value`` lines, a
``| name | value |`` table row, or a JSON object. The reward is the fraction of names whose value
is within tolerance (or all-or-nothing).

Where the answer is read: inside the last ``<answer>...</answer>`` if there is one, else after
the last line that mentions "final answer", else the whole response.

Hedging earns nothing: a name given twice with different values, or a value with more than
one number in it ("120 or 125", "120-125", a JSON list), counts as wrong for that name.
Numbers are read as written: ``$1,234.50`` is 1234.5, ``(1,234)`` is -1234, ``12.5%`` is 12.5
(or 0.125 with ``percent: as_fraction``); scale words such as "million" are not applied.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

from veriloop.core import Task
from veriloop.verifiers._registry import GraderError, Verdict, VerifierConfig, register_verifier
from veriloop.verifiers.answers._tags import tag_contents

_FINAL_MARK = re.compile(r"final answer", re.IGNORECASE)
_FENCED_JSON = re.compile(r"```(?:json)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s+")
_SEPARATOR = re.compile(r"[:=]|\s(?:is|was|were|are)\s", re.IGNORECASE)
_NUMBER = re.compile(
    r"(?P<open>\()?\s*(?P<sign>[-+\u2212\u2013])?\s*[$\u20ac\u00a3\u00a5]?\s*(?P<sign2>[-+\u2212])?\s*"
    r"(?P<digits>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?:[eE](?P<exponent>[-+]?\d+))?"
    r"\s*(?P<percent>%)?\s*(?P<close>\))?"
)
_MINUS = ("-", "\u2212", "\u2013")
_MAX_SCOPE_CHARS = 100_000


class Tolerance(VerifierConfig):
    rel_tol: float | None = Field(default=None, ge=0, description="relative tolerance for this name")
    abs_tol: float | None = Field(default=None, ge=0, description="absolute tolerance for this name")


class NumericConfig(VerifierConfig):
    values: dict[str, float] | None = Field(
        default=None, description="gold value of each name; defaults to the task's gold (a mapping)"
    )
    rel_tol: float = Field(default=1e-3, ge=0, description="relative tolerance: |got-want| <= rel_tol*|want|")
    abs_tol: float = Field(default=0.0, ge=0, description="absolute tolerance, used when larger")
    tolerances: dict[str, Tolerance] = Field(default_factory=dict, description="per-name overrides")
    all_or_nothing: bool = Field(default=False, description="reward 1 only when every value is right")
    percent: Literal["as_written", "as_fraction"] = Field(
        default="as_written", description="read '12.5%' as 12.5, or as 0.125"
    )
    reveal_expected: bool = Field(default=False, description="name the expected values in feedback")


def normalise_name(name: str) -> str:
    """``"Gross margin (Q3)"`` -> ``"gross_margin_q3"``: case, spacing and punctuation ignored."""
    return "_".join(re.findall(r"[0-9a-z]+", name.casefold()))


def read_numbers(text: str, percent: str = "as_written") -> list[float]:
    """Every number written in ``text`` (see the module docstring for the forms understood)."""
    numbers = []
    text = " ".join(text.split())  # single spaces keep the pattern below linear on hostile input
    for match in _NUMBER.finditer(text):
        value = float(match["digits"].replace(",", ""))
        if match["exponent"]:
            try:
                value *= 10.0 ** int(match["exponent"])
            except OverflowError:
                value = math.inf
        sign = match["sign"] or match["sign2"]
        if sign in _MINUS or (match["open"] and match["close"]):
            value = -value
        if match["percent"] and percent == "as_fraction":
            value /= 100.0
        numbers.append(value)
    return numbers


def answer_scope(response: str) -> str:
    """The part of a response that holds its answer (see the module docstring)."""
    tagged = tag_contents(response)
    if tagged:
        return tagged[-1]
    marks = list(_FINAL_MARK.finditer(response))
    if marks:
        return response[marks[-1].end() :]
    return response


def _json_object(scope: str) -> dict[str, Any] | None:
    fenced = _FENCED_JSON.findall(scope)
    text = fenced[-1] if fenced else scope.strip().lstrip(":").strip()
    if not text.startswith("{"):
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        value = _python_literal(text)
    return value if isinstance(value, dict) else None


def _python_literal(text: str) -> Any:
    """A Python dict literal such as ``str()`` of a mapping prints (literals only, never code)."""
    if len(text) > 20_000:
        return None
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def _json_pairs(obj: Mapping[str, Any], percent: str) -> Iterator[tuple[str, list[float]]]:
    for key, value in obj.items():
        if isinstance(value, bool) or value is None:
            yield key, []
        elif isinstance(value, (int, float)):
            yield key, [float(value)]
        elif isinstance(value, str):
            yield key, read_numbers(value, percent)
        elif isinstance(value, list):
            yield key, [n for item in value for n in (read_numbers(str(item), percent) or [math.nan])]
        else:
            yield key, []


def _line_pairs(scope: str, percent: str) -> Iterator[tuple[str, list[float]]]:
    for raw in scope.splitlines():
        line = _BULLET.sub("", raw.replace("**", "").replace("`", "")).strip()
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if len(cells) >= 2:
                yield cells[0], [n for cell in cells[1:] for n in read_numbers(cell, percent)]
            continue
        separator = _SEPARATOR.search(line)
        if separator and line[: separator.start()].strip():
            yield line[: separator.start()], read_numbers(line[separator.end() :], percent)


def extract_named_values(response: str, names: list[str], percent: str = "as_written") -> dict[str, list[list[float]]]:
    """For each wanted name, every reading of it found in the answer (each a list of numbers)."""
    wanted = {normalise_name(name): name for name in names}
    scope = answer_scope(response)[-_MAX_SCOPE_CHARS:]
    obj = _json_object(scope)
    pairs = _json_pairs(obj, percent) if obj is not None else _line_pairs(scope, percent)
    found: dict[str, list[list[float]]] = {}
    for key, numbers in pairs:
        name = wanted.get(normalise_name(str(key)))
        if name is not None:
            found.setdefault(name, []).append(numbers)
    return found


def gold_values(kind: str, values: Mapping[str, float] | None, task: Task) -> dict[str, float]:
    """The named gold numbers: ``values`` from the config, else the task's gold mapping."""
    gold = values if values is not None else task.gold
    if not isinstance(gold, Mapping) or not gold:
        raise GraderError(f"{kind} verifier needs 'values' or a task gold mapping each name to a number")
    try:
        wanted = {str(name): float(value) for name, value in gold.items()}
    except (TypeError, ValueError):
        raise GraderError(f"{kind} verifier: every gold value must be a number") from None
    if not all(math.isfinite(value) for value in wanted.values()):
        raise GraderError(f"{kind} verifier: every gold value must be finite")
    return wanted


def within_tolerance(config: NumericConfig | Any, name: str, got: float, want: float) -> bool:
    """``got`` is finite and close to ``want`` by the config's tolerances for ``name``
    (``config`` has ``rel_tol``, ``abs_tol`` and per-name ``tolerances``)."""
    override = config.tolerances.get(name, Tolerance())
    rel_tol = config.rel_tol if override.rel_tol is None else override.rel_tol
    abs_tol = config.abs_tol if override.abs_tol is None else override.abs_tol
    return math.isfinite(got) and math.isclose(got, want, rel_tol=rel_tol, abs_tol=abs_tol)


@dataclass(frozen=True)
class _Outcome:
    name: str
    correct: bool
    problem: str  # for the model: what was wrong with this name ("" when correct)
    got: float | None = None


def _judge_one(name: str, want: float, readings: list[list[float]], config: NumericConfig) -> _Outcome:
    if not readings:
        return _Outcome(name, False, f"{name}: missing")
    if any(len(numbers) != 1 for numbers in readings):
        empty = all(not numbers for numbers in readings)
        return _Outcome(name, False, f"{name}: no number given" if empty else f"{name}: give exactly one number")
    values = {numbers[0] for numbers in readings}
    if len(values) > 1:
        shown = ", ".join(f"{v:g}" for v in sorted(values))
        return _Outcome(name, False, f"{name}: several different values given ({shown}); give one")
    got = values.pop()
    if within_tolerance(config, name, got, want):
        return _Outcome(name, True, "", got)
    direction = "too high" if got > want else "too low"
    return _Outcome(name, False, f"{name}: {got:g} is {direction}", got)


@register_verifier("numeric", NumericConfig)
def check_numeric(config: NumericConfig, task: Task, response: str) -> Verdict:
    """Fraction of named values within tolerance (1.0 and passed when all are)."""
    wanted = gold_values("numeric", config.values, task)
    found = extract_named_values(response, list(wanted), config.percent)
    outcomes = [_judge_one(name, want, found.get(name, []), config) for name, want in wanted.items()]
    right = sum(o.correct for o in outcomes)
    passed = right == len(outcomes)
    reward = float(passed) if config.all_or_nothing else right / len(outcomes)
    wrong = [o for o in outcomes if not o.correct]
    detail = f"{right}/{len(outcomes)} values within tolerance"
    if wrong:
        detail += "; " + "; ".join(f"{o.problem} (want {wanted[o.name]:g})" for o in wrong)
    if passed:
        return Verdict(reward, True, detail=detail, feedback="All values are correct.")
    lines = [o.problem + (f" (expected {wanted[o.name]:g})" if config.reveal_expected else "") for o in wrong]
    feedback = f"{right} of {len(outcomes)} values are correct. " + "; ".join(lines) + "."
    if any("missing" in o.problem for o in wrong):
        feedback += " Give each value on its own line as 'name: number'."
    return Verdict(reward, False, detail=detail, feedback=feedback)
