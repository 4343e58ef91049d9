"""Honest rewrites of a task's gold answer, for ``veriloop audit``: the same answer in the forms
people and models write it, each of which the verifier must score as it scores the gold.

A verifier that rejects an honest form teaches a policy to avoid a right answer, and makes an
evaluation under-count a model that writes it. Rewrites are registered by verifier kind; each
one keeps the answer's value and changes only its form:

- ``math``: the boxed value, a whole number written with a decimal point (``36.0``), an interval
  written bare or as membership (``(2, 5]``, ``x \\in (2, 5]``) and the inequality it stands for
  (``2 < x \\le 5``), whichever of them the gold answer is;
- ``numeric``: ``name: value`` lines, a JSON object whose whole numbers carry a decimal point,
  values with thousands separators, and values followed by a fiscal-period label (``FY2024``);
- ``json_schema``: the gold value with whole numbers written as ``36.0``, pretty-printed, and in
  a fenced block;
- ``bfcl``: the gold calls in Python call syntax and BFCL's, OpenAI's and ``<tool_call>`` JSON
  forms, fenced, spread over lines, with keys or parallel calls reordered (``_exploits_bfcl``).

A form is rejected when it does not pass (a score below the gold's, or an infra error).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from veriloop.core import Registry, Task


@dataclass(frozen=True)
class HonestForm:
    """One honest rewrite of the gold answer."""

    name: str
    response: str


HonestFormAdapter = Callable[[Task], list[HonestForm]]
"""``adapter(task) -> honest forms of its gold answer`` (empty when it has none)."""

HONEST_FORMS: Registry[HonestFormAdapter] = Registry("honest form adapter")


def honest_forms_for(task: Task) -> list[HonestForm]:
    """The honest forms of ``task``'s gold answer; none for a kind without an adapter."""
    kind = task.verifier_kind
    return HONEST_FORMS.get(kind)(task) if kind in HONEST_FORMS else []


# ---- math ---------------------------------------------------------------------------------

_BOUND = r"(-?\s*\\infty|-?\s*\d+(?:\.\d+)?(?:/\d+)?|-?\\frac\{\d+\}\{\d+\})"
_INTERVAL = re.compile(rf"^\s*([(\[])\s*{_BOUND}\s*,\s*{_BOUND}\s*([)\]])\s*$")
_LESS = r"(<|\\le|\\leq|<=|≤)"
_CHAIN = re.compile(rf"^\s*{_BOUND}\s*{_LESS}\s*([a-zA-Z])\s*{_LESS}\s*{_BOUND}\s*$")
_ONE_SIDED = re.compile(rf"^\s*([a-zA-Z])\s*(<|>|\\le|\\leq|\\ge|\\geq|<=|>=|≤|≥)\s*{_BOUND}\s*$")
_MEMBER = re.compile(r"^\s*([a-zA-Z])\s*(?:\\in|∈)\s*(.+)$")
_STRICT = {"<", ">"}
_UPPER = {"<", "\\le", "\\leq", "<=", "≤"}
_FLIPPED = {"<": ">", "\\le": "\\ge"}


def _interval_as_inequality(text: str, variable: str = "x") -> str | None:
    match = _INTERVAL.match(text)
    if not match:
        return None
    opening, low, high, closing = match.groups()
    low_open, high_open = "infty" in low, "infty" in high
    if low_open and high_open:
        return None
    left = "<" if opening == "(" else "\\le"
    right = "<" if closing == ")" else "\\le"
    if low_open:
        return f"{variable} {right} {high}"
    if high_open:
        return f"{variable} {_FLIPPED[left]} {low}"
    return f"{low} {left} {variable} {right} {high}"


def _inequality_as_interval(text: str) -> tuple[str, str] | None:
    """``(variable, interval)`` of a simple inequality (``2 < x \\le 5``, ``x \\ge 3``), else None."""
    if match := _CHAIN.match(text):
        low, left, variable, right, high = match.groups()
        return variable, f"{'(' if left in _STRICT else '['}{low}, {high}{')' if right in _STRICT else ']'}"
    if match := _ONE_SIDED.match(text):
        variable, relation, bound = match.groups()
        strict = relation in _STRICT
        if relation in _UPPER:
            return variable, f"(-\\infty, {bound}{')' if strict else ']'}"
        return variable, f"{'(' if strict else '['}{bound}, \\infty)"
    return None


def math_forms(answer: str) -> list[HonestForm]:
    """Honest forms of a math answer (see the module's docstring)."""
    answer = answer.strip()
    forms = [HonestForm("boxed", f"The answer is $\\boxed{{{answer}}}$.")]
    if re.fullmatch(r"-?\d+", answer):
        forms.append(HonestForm("whole number with a decimal point", f"$\\boxed{{{answer}.0}}$"))
    member = _MEMBER.match(answer)
    variable, interval = (member.group(1), member.group(2).strip()) if member else ("x", answer)
    if inequality := _interval_as_inequality(interval, variable):
        forms.append(HonestForm("interval as an inequality", f"$\\boxed{{{inequality}}}$"))
        other = interval if member else f"{variable} \\in {interval}"
        forms.append(HonestForm("bare interval" if member else "interval as membership", f"$\\boxed{{{other}}}$"))
    elif found := _inequality_as_interval(answer):
        variable, bare = found
        forms.append(HonestForm("inequality as a bare interval", f"$\\boxed{{{bare}}}$"))
        forms.append(HonestForm("inequality as membership", f"$\\boxed{{{variable} \\in {bare}}}$"))
    return forms


@HONEST_FORMS.register("math")
def _math(task: Task) -> list[HonestForm]:
    answer = task.verifier.get("answer", task.gold)
    return math_forms(str(answer)) if answer is not None and not isinstance(answer, bool) else []


# ---- numbers in documents and JSON --------------------------------------------------------


def _decimal_point(value: Any) -> Any:
    """``value`` with every whole number (not a bool) written as a float."""
    if type(value) is int:
        return float(value)
    if isinstance(value, dict):
        return {key: _decimal_point(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_decimal_point(item) for item in value]
    return value


def _plain(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _thousands(value: float) -> str:
    whole = int(value)
    return f"{whole:,}" if float(value).is_integer() else f"{value:,}"


def numeric_forms(values: dict[str, float]) -> list[HonestForm]:
    """Honest forms of a ``numeric`` answer (see the module's docstring)."""
    forms = [
        HonestForm("name: value lines", "".join(f"{name}: {_plain(v)}\n" for name, v in values.items())),
        HonestForm("JSON with decimal points", json.dumps({name: float(v) for name, v in values.items()})),
        HonestForm(
            "values followed by a fiscal-year label",
            "".join(f"{name}: {_plain(v)} FY2024\n" for name, v in values.items()),
        ),
    ]
    if any(abs(v) >= 1000 for v in values.values()):
        forms.append(
            HonestForm("thousands separators", "".join(f"{name}: {_thousands(v)}\n" for name, v in values.items()))
        )
    return forms


@HONEST_FORMS.register("numeric")
def _numeric(task: Task) -> list[HonestForm]:
    values = task.verifier.get("values") or task.gold
    if not isinstance(values, dict) or not values:
        return []
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values.values()):
        return []
    return numeric_forms(values)


@HONEST_FORMS.register("json_schema")
def _json_schema(task: Task) -> list[HonestForm]:
    if not task.verifier.get("match_gold") or task.gold is None:
        return []
    gold = task.gold
    if isinstance(gold, str):
        try:
            gold = json.loads(gold)
        except ValueError:
            return []
    forms = [HonestForm("pretty-printed in a fenced block", f"```json\n{json.dumps(gold, indent=2)}\n```\n")]
    if json.dumps(_decimal_point(gold)) != json.dumps(gold):
        forms.append(HonestForm("whole numbers with a decimal point", json.dumps(_decimal_point(gold))))
    return forms
