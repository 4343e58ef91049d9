"""The ``document_fields`` verifier kind: figures extracted from a document, answered as JSON,
checked against the source with tolerances and against each other.

A task names the fields it wants and their gold values (the task's gold mapping, or
``values``); the answer is one JSON object mapping each name to a number (``_document_answer``
reads it). Each field earns one point when:

* it is given exactly once, as exactly one number (a key repeated, a list, "120 or 125" earn
  nothing: hedging; nor does a bound or an approximation such as ">= 120" or "about 120"); a
  period label next to the number ("1,234 FY2023") is a label, not a second number;
* in the unit asked for, when the answer names a unit (``{"value": 1.2, "unit": "millions"}``
  for a field asked in thousands is wrong, whatever the number);
* within the field's tolerance of the gold value;
* and every identity whose total it is holds in the answer: ``identities`` state that a total
  equals the signed sum of its parts (``{"total": "gross_profit", "parts": ["revenue",
  "-cost_of_sales"]}``); a total whose answered parts do not add up to it loses its point.

Several different answer objects in one response earn nothing. A key that was not asked for is a fabricated field: it earns nothing and counts as one more
field (``fabricated: count``), so the reward is ``right / (asked + fabricated)``.

Feedback names each wrong field and why, measured against the document in the prompt: a sign
flipped, a factor of 1,000 (thousands for millions), a figure that is in the document but is
another one (a prior-year column, the figure before a restatement), or a value the document
does not contain at all.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from veriloop.core import Task
from veriloop.verifiers._registry import GraderError, Verdict, VerifierConfig, register_task_check, register_verifier
from veriloop.verifiers.answers._document_answer import FieldAnswer, Reading, read_fields, unit_of
from veriloop.verifiers.answers._numeric import Tolerance, gold_values, within_tolerance
from veriloop.verifiers.answers._numeric_read import normalise_name, read_numbers


class Identity(VerifierConfig):
    total: str = Field(description="the field that must equal the signed sum of the parts")
    parts: list[str] = Field(min_length=1, description="field names, each optionally prefixed with '-' to subtract")
    abs_tol: float = Field(default=1.0, ge=0, description="largest gap between total and sum still accepted")

    def signed_parts(self) -> list[tuple[int, str]]:
        """``[(+1 or -1, name), ...]``."""
        found = []
        for part in self.parts:
            text = part.strip()
            sign = -1 if text.startswith("-") else 1
            found.append((sign, text.lstrip("+-").strip()))
        return found


class DocumentFieldsConfig(VerifierConfig):
    values: dict[str, float] | None = Field(
        default=None, description="gold value of each field; defaults to the task's gold (a mapping)"
    )
    units: dict[str, str] = Field(default_factory=dict, description="unit each field is asked in (thousands, ...)")
    rel_tol: float = Field(default=1e-4, ge=0, description="relative tolerance: |got-want| <= rel_tol*|want|")
    abs_tol: float = Field(default=0.0, ge=0, description="absolute tolerance, used when larger")
    tolerances: dict[str, Tolerance] = Field(default_factory=dict, description="per-field overrides")
    identities: list[Identity] = Field(default_factory=list, description="totals that must equal sums of parts")
    fabricated: Literal["count", "ignore"] = Field(
        default="count", description="keys not asked for count as wrong fields, or are ignored"
    )
    all_or_nothing: bool = Field(default=False, description="reward 1 only when every field is right")
    reveal_expected: bool = Field(default=False, description="name the expected values in feedback")


@dataclass(frozen=True)
class _Field:
    name: str
    correct: bool
    problem: str = ""  # for the model: what is wrong with this field ("" when correct)
    got: float | None = None


def _gold(config: DocumentFieldsConfig, task: Task) -> dict[str, float]:
    return gold_values("document_fields", config.values, task)


def _close(config: DocumentFieldsConfig, name: str, got: float, want: float) -> bool:
    return within_tolerance(config, name, got, want)


def _source_numbers(task: Task) -> set[float]:
    text = task.prompt if isinstance(task.prompt, str) else "\n".join(m.content for m in task.prompt)
    return {abs(n) for n in read_numbers(text)}


def _diagnosis(config: DocumentFieldsConfig, name: str, got: float, want: float, source: set[float]) -> str:
    unit = config.units.get(name)
    if not math.isfinite(got):
        return f"{name}: not a finite number"
    if want != 0 and _close(config, name, -got, want):
        return f"{name}: {got:g} has the wrong sign"
    if want != 0 and (_close(config, name, got / 1000, want) or _close(config, name, got * 1000, want)):
        return f"{name}: {got:g} is off by a factor of 1,000" + (f" (asked in {unit})" if unit else "")
    direction = "too high" if got > want else "too low"
    in_source = any(math.isclose(abs(got), n, rel_tol=1e-9, abs_tol=1e-9) for n in source)
    if in_source:
        return f"{name}: {got:g} is in the document but is another figure (another period, line or a superseded one)"
    if abs(want) in source:
        return f"{name}: {got:g} appears nowhere in the document"
    return f"{name}: {got:g} is {direction}"


def _judge(config: DocumentFieldsConfig, name: str, want: float, readings: list[Reading], source: set[float]) -> _Field:
    if not readings:
        return _Field(name, False, f"{name}: missing")
    if len(readings) > 1:
        return _Field(name, False, f"{name}: given {len(readings)} times; give it once")
    reading = readings[0]
    if reading.bound:
        return _Field(
            name, False, f"{name}: {reading.bound!r} gives a bound or an approximation; give the value itself"
        )
    if len(reading.numbers) != 1:
        return _Field(name, False, f"{name}: no number given" if not reading.numbers else f"{name}: give one number")
    got = reading.numbers[0]
    asked = unit_of(config.units.get(name, ""))
    if reading.unit_text is not None and asked is not None and reading.unit != asked:
        return _Field(name, False, f"{name}: given in {reading.unit_text!r}, asked in {config.units[name]}", got)
    if _close(config, name, got, want):
        return _Field(name, True, "", got)
    return _Field(name, False, _diagnosis(config, name, got, want, source), got)


def _inconsistent(config: DocumentFieldsConfig, fields: dict[str, _Field]) -> dict[str, str]:
    """``{total: problem}`` for each identity whose answered parts do not add up to its total."""
    found: dict[str, str] = {}
    for identity in config.identities:
        members = [identity.total, *(name for _, name in identity.signed_parts())]
        if any(m not in fields or fields[m].got is None for m in members):
            continue
        total = fields[identity.total].got or 0.0
        parts = sum(sign * (fields[name].got or 0.0) for sign, name in identity.signed_parts())
        if abs(total - parts) > identity.abs_tol:
            shown = " ".join(("- " if sign < 0 else "+ ") + name for sign, name in identity.signed_parts())
            found[identity.total] = f"{identity.total}: {shown.removeprefix('+ ')} = {parts:g}, not {total:g}"
    return found


def _fields(config: DocumentFieldsConfig, task: Task, answer: FieldAnswer) -> tuple[list[_Field], list[str]]:
    """Every asked field judged, and the keys the answer made up."""
    wanted = _gold(config, task)
    source = _source_numbers(task)
    by_name = {normalise_name(name): name for name in wanted}
    judged = {
        name: _judge(config, name, want, answer.readings.get(normalise_name(name), []), source)
        for name, want in wanted.items()
    }
    for total, problem in _inconsistent(config, judged).items():
        if judged[total].correct:
            judged[total] = _Field(total, False, problem, judged[total].got)
    made_up = [readings[0].key for key, readings in answer.readings.items() if key not in by_name]
    return list(judged.values()), made_up if config.fabricated == "count" else []


@register_verifier("document_fields", DocumentFieldsConfig)
def check_document_fields(config: DocumentFieldsConfig, task: Task, response: str) -> Verdict:
    """Per-field credit for figures within tolerance of the source and consistent with each other."""
    answer = read_fields(response)
    if not answer.found:
        _gold(config, task)
        return Verdict(
            0.0, False, detail="no JSON object in the answer", feedback="Answer with one JSON object of name: number."
        )
    if answer.answers > 1:
        _gold(config, task)
        detail = f"{answer.answers} different answer objects"
        return Verdict(0.0, False, detail=detail, feedback="Give one JSON answer object, not several.")
    fields, made_up = _fields(config, task, answer)
    right = sum(f.correct for f in fields)
    counted = len(fields) + len(made_up)
    passed = right == len(fields) and not made_up
    reward = float(passed) if config.all_or_nothing else right / counted
    wanted = _gold(config, task)
    problems = [
        f.problem + (f" (expected {wanted[f.name]:g})" if config.reveal_expected else "")
        for f in fields
        if not f.correct
    ]
    problems += [f"{key}: not asked for (a fabricated field)" for key in made_up]
    detail = f"{right}/{counted} fields right"
    if not problems:
        return Verdict(reward, passed, detail=detail, feedback="All fields are correct.")
    wrong = [f for f in fields if not f.correct]
    detail += "; " + "; ".join(f"{f.problem} (want {wanted[f.name]:g})" for f in wrong)
    detail += "".join(f"; {key}: fabricated" for key in made_up)
    return Verdict(
        reward, passed, detail=detail, feedback=f"{right} of {counted} fields are right. " + "; ".join(problems) + "."
    )


@register_task_check("document_fields")
def document_fields_task_problem(config: DocumentFieldsConfig, task: Task) -> str | None:
    """Gold numbers for every field; identities, units and tolerances naming known fields and
    holding on the gold values."""
    try:
        wanted = _gold(config, task)
    except GraderError as exc:
        return str(exc).removeprefix("document_fields verifier: ")
    for where, names in (("units", config.units), ("tolerances", config.tolerances)):
        unknown = sorted(set(names) - set(wanted))
        if unknown:
            return f"{where} name fields that have no gold value: {', '.join(unknown)}"
    for number, identity in enumerate(config.identities):
        members = [identity.total, *(name for _, name in identity.signed_parts())]
        unknown = [m for m in members if m not in wanted]
        if unknown:
            return f"identities.{number} names fields that have no gold value: {', '.join(unknown)}"
        gold_fields = {name: _Field(name, True, "", value) for name, value in wanted.items()}
        broken = _inconsistent(config.model_copy(update={"identities": [identity]}), gold_fields)
        if broken:
            return f"identities.{number} does not hold on the gold values: {broken[identity.total]}"
    return None
