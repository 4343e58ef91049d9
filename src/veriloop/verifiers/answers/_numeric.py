"""The ``numeric`` verifier kind: named values read from an answer, each within a tolerance.

The document- and table-extraction domain: a task names the values it wants (``revenue_2023``,
``gross_margin_q3``) and their gold numbers; the answer gives each as ``name: value`` lines, a
``| name | value |`` table row, or a JSON object. The reward is the fraction of names whose value
is within tolerance (or all-or-nothing).

Where the answer is read: inside every ``<answer>...</answer>`` if there is one, else after
the last line that mentions "final answer", else the whole response (``_numeric_read``).

An answer that states two different values for a name commits to neither: every statement of
the name counts (lines, table rows, every JSON object, a key repeated in one object), and the
name is wrong unless they all give the same one number. So are a value with more than one
number in it ("120 or 125", "120-125", a JSON list) and a bound or an approximation instead of
a value (">= 10", "at least 12", "between 10 and 20", "~12"). Stating the same value twice
("12" and "12.0") is fine, and a period label next to a value ("1,234 FY2023", "12.5 (FY24)",
"Q3 2024") is a label, not a second number. Numbers are read as written: ``$1,234.50`` is
1234.5, ``(1,234)`` is -1234, ``12.5%`` is 12.5 (or 0.125 with ``percent: as_fraction``); scale
words such as "million" are not applied.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

from veriloop.core import Task
from veriloop.verifiers._registry import GraderError, Verdict, VerifierConfig, register_verifier
from veriloop.verifiers.answers._numeric_read import NamedReading, named_readings


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


def extract_named_values(response: str, names: list[str], percent: str = "as_written") -> dict[str, list[list[float]]]:
    """For each wanted name, every reading of it found in the answer (each a list of numbers)."""
    found = named_readings(response, names, percent)
    return {name: [list(reading.numbers) for reading in readings] for name, readings in found.items()}


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


def _judge_one(name: str, want: float, readings: list[NamedReading], config: NumericConfig) -> _Outcome:
    if not readings:
        return _Outcome(name, False, f"{name}: missing")
    stated = [r for r in readings if r.numbers or r.bound] or readings  # a mention without a value states none
    bound = next((r.bound for r in stated if r.bound), "")
    if bound:
        return _Outcome(name, False, f"{name}: {bound!r} gives a bound or an approximation; give the value itself")
    if any(len(r.numbers) != 1 for r in stated):
        empty = all(not r.numbers for r in stated)
        return _Outcome(name, False, f"{name}: no number given" if empty else f"{name}: give exactly one number")
    values = {r.numbers[0] for r in stated}
    if len(values) > 1:
        shown = ", ".join(f"{v:g}" for v in sorted(values))
        return _Outcome(name, False, f"{name}: gave {len(values)} different values ({shown}); give one")
    got = values.pop()
    if within_tolerance(config, name, got, want):
        return _Outcome(name, True, "", got)
    direction = "too high" if got > want else "too low"
    return _Outcome(name, False, f"{name}: {got:g} is {direction}", got)


@register_verifier("numeric", NumericConfig)
def check_numeric(config: NumericConfig, task: Task, response: str) -> Verdict:
    """Fraction of named values within tolerance (1.0 and passed when all are)."""
    wanted = gold_values("numeric", config.values, task)
    found = named_readings(response, list(wanted), config.percent)
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
