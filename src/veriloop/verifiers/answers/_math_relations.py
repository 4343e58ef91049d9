"""Equations and inequalities in a final answer; runs inside the math check process (``_math_check.py``).

Two readings the comparison with the gold answer needs:

* ``equations``: the equations of an answer (``x = 5 = 7``, ``2+3 = 6``, ``x = 7 \\Rightarrow
  x = 5``), each split into its sides at every ``=`` outside brackets. Each side that is a value
  states the answer, so they must all agree, and so must the values one variable is set equal
  to: an answer that writes two values commits to neither.
* ``solution_set``: the set of reals a one-variable inequality, a membership (``x \\in (2, 5]``)
  or a bare interval describes, so that ``2 < x \\le 5`` and ``(2, 5]`` are the same answer in
  either direction. The variable, when one is named, comes back too: with ``strict`` names
  matter, and ``y \\in (2, 5]`` does not answer a question about ``x``.
"""

from __future__ import annotations

import re
from typing import Any

from sympy import And, Eq, FiniteSet, Interval, Or, Set, Symbol, Union
from sympy.core.relational import Relational

MAX_SIDES = 8
# An equals sign of an equation: not part of <=, >=, !=, :=, => or \leq-style commands.
_EQUALS = re.compile(r"(?<![<>!:=\\])==?(?![=>])")
# What joins one equation to the next: implication arrows, wide spaces, line breaks of an aligned block.
_BETWEEN_EQUATIONS = re.compile(
    r"\\(?:Rightarrow|Longrightarrow|implies|iff|Leftrightarrow|Longleftrightarrow|therefore|rightarrow"
    r"|longrightarrow|to|quad|qquad)(?![A-Za-z])|\\\\"
)
_ALIGNMENT = re.compile(r"&|\\(?:begin|end)\{[A-Za-z*]+\}")
_OR = re.compile(r"\bor\b|\\lor\b|\\vee\b", re.IGNORECASE)
# A side that is a variable's name alone: x, y_1, \theta, a_{n}.
VARIABLE_NAME = re.compile(r"(?:[A-Za-z]|\\[A-Za-z]+)(?:_\{?[A-Za-z0-9]+\}?)?")


def bracket_depths(text: str) -> list[int]:
    """The bracket depth at each character of ``text``; ``(2, 5]`` closes like ``(2, 5)``."""
    depths, depth = [], 0
    for char in text:
        if char in ")]}":
            depth = max(0, depth - 1)
        depths.append(depth)
        if char in "([{":
            depth += 1
    return depths


def _split_top_level(text: str, separator: re.Pattern[str]) -> list[str]:
    """``text`` split at each match of ``separator`` that lies outside every bracket."""
    depths = bracket_depths(text)
    parts, start = [], 0
    for found in separator.finditer(text):
        if depths[found.start()] == 0:
            parts.append(text[start : found.start()].strip())
            start = found.end()
    parts.append(text[start:].strip())
    return parts


def equation_sides(candidate: str) -> list[str]:
    """The sides of ``candidate`` split at each top-level ``=``; one side when there is none."""
    if "=" not in candidate:
        return [candidate]
    sides = _split_top_level(candidate, _EQUALS)
    if len(sides) > MAX_SIDES or any(not side for side in sides):
        return [candidate]
    return sides


def equations(candidate: str) -> list[list[str]]:
    """Each equation written in ``candidate``, as its sides: equations joined by an implication
    arrow or a line break are separate (``x^2 = 25 \\Rightarrow x = 5``); a line that starts with
    ``=`` continues the one before (an aligned chain ``x &= 7 \\\\ &= 5`` is one equation)."""
    if "=" not in candidate:
        return [[candidate]]
    parts = [p for p in _split_top_level(_ALIGNMENT.sub(" ", candidate), _BETWEEN_EQUATIONS) if p]
    joined: list[str] = []
    for part in parts:
        if joined and part.startswith("="):
            joined[-1] += " " + part
        else:
            joined.append(part)
    return [equation_sides(part) for part in joined[:MAX_SIDES]]


def _is_inequality(value: Any) -> bool:
    return isinstance(value, Relational) and not isinstance(value, Eq)


def _relational_set(value: Any) -> tuple[Set, Symbol] | None:
    """A relation of one variable (``x \\ge 3``, ``2 < x \\le 5``, ``x < 2 \\lor x > 3``) as a set."""
    symbols = value.free_symbols
    if len(symbols) != 1:
        return None
    symbol = next(iter(symbols))
    if not isinstance(symbol, Symbol):
        return None
    try:
        found = value.as_set()
    except Exception:  # sympy raises many types on relations it cannot solve; then no set
        return None
    return (found, symbol) if isinstance(found, Set) else None


def solution_set(value: Any, text: str = "") -> tuple[Set, Symbol | None] | None:
    """``(set, variable)`` that ``value`` describes, or None when it is no such answer.

    Intervals and unions of intervals stand for themselves (no variable); ``Eq(x, interval)``
    is how math-verify reads ``x \\in interval``; relations of one real variable are solved.
    math-verify reads "x < 2 or x > 3" and "x > 2 and x < 5" alike, as a set of relations, so
    ``text`` (the answer as written) says which: "or" joins their sets, anything else meets them.
    """
    if isinstance(value, FiniteSet) and value.args and all(_is_inequality(arg) for arg in value.args):
        either = _OR.search(text) is not None
        return _relational_set(Or(*value.args) if either else And(*value.args))
    if isinstance(value, Interval) or (
        isinstance(value, Union) and all(isinstance(part, Interval) for part in value.args)
    ):
        return value, None
    if isinstance(value, Eq) and isinstance(value.lhs, Symbol) and isinstance(value.rhs, (Interval, Union)):
        inner = solution_set(value.rhs)
        return (inner[0], value.lhs) if inner else None
    if isinstance(value, (And, Or)) and all(
        isinstance(arg, Relational) and not isinstance(arg, Eq) for arg in value.args
    ):
        return _relational_set(value)
    if isinstance(value, Relational) and not isinstance(value, Eq):
        return _relational_set(value)
    return None
