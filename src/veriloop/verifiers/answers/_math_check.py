"""The math check itself; runs inside a killable check process (``_check_pool.py``, ``_math.py``).

``check_math_answer`` takes plain data and returns plain data. It finds the response's final
answer, refuses hedges (several different final answers), and compares the answer with the gold
answer using math-verify with its signal-based timeouts switched off: the pool on the host
enforces the time limit by killing the process.

Final answer, in order of preference: every ``\\boxed{...}`` (or ``\\fbox``); every
``<answer>...</answer>``; every ``#### X`` or "answer is X" / "Answer: X" line; else the last
non-empty line (when ``fallback`` is ``"last_line"``), together with any earlier line that holds
nothing but a number, so that "41\n42" is two answers rather than one.

Before anything is read, minus signs (U+2212 and its variants) become ``-`` and percent signs
are dropped on both sides: a percentage is read as the number written, never rescaled, so
"50\\%" is 50 (not also 0.5). When the gold answer is a plain number, the final answer must be
one too (words, units, a fraction or scientific notation around it allowed): an expression that
merely evaluates to it ("37 \\cdot 43", ``\\binom{10}{3}``, a sum, an integral) restates the
question rather than answering it. Alternatives are looked for inside ``\\text{...}`` as well,
and never inside brackets: an interval is one answer, and it never equals a finite set. Every
side of an equation that is a value must agree with the others, and an interval, ``x \\in`` one
and the inequality it stands for compare as the sets they describe (``_math_relations.py``).
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from math_verify import parse, verify
from sympy import Basic, Expr, FiniteSet, Interval, Set, Tuple, UnevaluatedExpr, Union
from sympy.matrices import MatrixBase

from veriloop.verifiers.answers._math_relations import VARIABLE_NAME, bracket_depths, equations, solution_set
from veriloop.verifiers.answers._tags import tag_contents

MAX_CANDIDATE_CHARS = 2000
_BOX_START = re.compile(r"\\(?:boxed|fbox)[ \t]*\{")
_BRACE = re.compile(r"[{}]")
# Written so that no pattern backtracks more than linearly on hostile text: each is matched
# on one line at a time, from a literal start ("####", "answer").
_HASHES = re.compile(r"#{4}[ \t]*(?P<marked>.*\S)")
_ANSWER_MARK = re.compile(r"\banswer[ \t]*(?:is[ \t]*:?|:|=)[ \t]*(?P<marked>.*\S)", re.IGNORECASE)
_MINUS_SIGNS = str.maketrans({"\u2212": "-", "\ufe63": "-", "\uff0d": "-", "\u2796": "-"})
_PERCENT = re.compile(r"\\?%|\bper ?cent\b", re.IGNORECASE)
# Text blocks whose words are read as words: "7 \text{ or maybe } 8" offers two answers.
_TEXT_BLOCK = re.compile(r"\\(?:text|textbf|textit|textrm|textnormal|mathrm|mbox|operatorname)\s*\{([^{}]*)\}")
# Typesetting that never changes a number: thin spaces (digit-group separators in "1\\,591"),
# degree marks, \left and \right, dropped; other spaces and dollar signs, read as a space.
_JOINING = re.compile(r"\\[,!]|\^\s*\{?\s*\\circ\s*\}?|\u00b0|\\(?:circ|degree|left|right)\b")
_SPACING = re.compile(r"\\[;: ]|~|\\?\$")
# Separators between alternatives inside one final answer: "7 or 8", "7 and 8", "7; 8", "7, 8", "7 8".
_ALTERNATIVES = re.compile(
    r"\s+(?:or|and)\s+|\\text\s*\{\s*(?:or|and)\s*\}|\\(?:lor|vee)\b|;|,\s+|(?<=\d)\s+(?=[-+]?\d)",
    re.IGNORECASE,
)
# Arithmetic on numbers only: digits, operators, brackets, fractions and roots.
_ARITHMETIC = re.compile(r"(?:[\d\s.,+\-*/^(){}\[\]]|\\(?:[dt]?frac|sqrt|cdot|times|div|left|right)(?![A-Za-z]))+")
# A plain number: integer (commas between groups of three allowed), decimal, a/b, or \frac{a}{b}.
_NUMBER = r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
_SIMPLE = re.compile(
    rf"\$?\s*(?:(?P<number>{_NUMBER})(?:\s*/\s*(?P<denominator>\d+))?"
    r"|(?P<sign>-?)\\[dt]?frac\s*\{\s*(?P<top>\d+)\s*\}\s*\{\s*(?P<bottom>\d+)\s*\})\s*\$?"
)
# One number, written out: integer, decimal, fraction, scientific notation; words or units around it.
_LITERAL_NUMBER = (
    rf"\(?\s*[-+]?\s*(?:{_NUMBER}(?:\s*/\s*\d+)?(?:\s*(?:\\times|\\cdot|\*)\s*10\s*\^\s*\{{?\s*[-+]?\d+\s*\}}?"
    r"|[eE][-+]?\d+)?|10\s*\^\s*\{?\s*[-+]?\d+\s*\}?"
    r"|\\[dt]?frac\s*\{\s*[-+]?\d+\s*\}\s*\{\s*[-+]?\d+\s*\}|\\[dt]?frac\d\d)\s*\)?"
)
# Units after the number: words, with small powers, joined by spaces, "/" or \cdot ("m/s^2").
_UNITS = r"(?:\s*(?:/|\\cdot)?\s*[A-Za-z]+(?:\s*\^\s*\{?\s*-?[1-3]\s*\}?)?)*"
_LITERAL = re.compile(rf"[A-Za-z:.,\s]*?(?P<number>{_LITERAL_NUMBER}){_UNITS}[\s.]*")
# A sentence that ends in a plain number after words only: "Therefore x = -5".
_WORDS_THEN_NUMBER = re.compile(rf"(?P<words>[A-Za-z ,:=]*?)\s*(?P<number>{_NUMBER})")


def _boxed(text: str) -> list[str]:
    """The contents of every closed ``\\boxed{...}``, in order, found in one pass over the text."""
    starts = {m.end() - 1: m.end() for m in _BOX_START.finditer(text)}  # "{" offset -> content start
    if not starts:
        return []
    found: list[tuple[int, str]] = []
    stack: list[int] = []
    for brace in _BRACE.finditer(text, min(starts)):
        if brace.group() == "{":
            stack.append(brace.start())
        elif stack:
            opened = stack.pop()
            if opened in starts:
                found.append((opened, text[starts[opened] : brace.start()]))
    return [content for _, content in sorted(found)]


def _strip_wrapping(candidate: str) -> str:
    candidate = candidate.strip().rstrip(".").strip()
    if len(candidate) >= 2 and candidate[0] == candidate[-1] == "$":
        candidate = candidate.strip("$").strip()
    return candidate


def _marked_line(line: str) -> str | None:
    """What a line marks as the answer: after a leading ``####``, else after its first "answer is",
    "answer:" or "answer =", else after the ``####`` that is its first ``#``; None when none."""
    if line.startswith("####"):
        found = _HASHES.match(line)
        return found["marked"] if found else None
    found = _ANSWER_MARK.search(line)
    if found:
        return found["marked"]
    first_hash = line.find("#")
    found = _HASHES.match(line, first_hash) if first_hash >= 0 else None
    return found["marked"] if found else None


def final_answers(text: str, fallback: str) -> tuple[str, list[str]]:
    """``(where, candidates)``: how the final answer was marked and every candidate found."""
    boxed = _boxed(text)
    if boxed:
        return "boxed", [_strip_wrapping(b) for b in boxed]
    tagged = tag_contents(text)
    if tagged:
        return "answer tag", [_strip_wrapping(t) for t in tagged]
    marked = [m for m in map(_marked_line, text.split("\n")) if m and m.strip(" \t:=.")]
    marked = [_strip_wrapping(m) for m in marked]
    if marked:
        return "answer line", marked
    if fallback == "last_line":
        lines = [_strip_wrapping(line) for line in text.splitlines() if line.strip()]
        if lines:
            # Other lines that hold nothing but a number are rival answers ("41\n42"), not working.
            rivals = [line for line in lines[:-1] if _SIMPLE.fullmatch(line)]
            return "last line", [*rivals, lines[-1]]
    return "none", []


@functools.lru_cache(maxsize=4096)
def _parse_candidate(candidate: str, latex: bool) -> tuple[Any, ...]:
    if latex:
        return tuple(parse("\\boxed{" + candidate + "}", parsing_timeout=None))
    if "\\" in candidate and "$" not in candidate:
        parsed = parse("$" + candidate + "$", parsing_timeout=None)
        if parsed:
            return tuple(parsed)
    return tuple(parse(candidate, parsing_timeout=None))


@functools.lru_cache(maxsize=4096)
def parse_gold(gold: str) -> tuple[Any, ...]:
    """The gold answer parsed once per check process (a plain value is read as the inside of a box)."""
    if "$" in gold or "\\boxed" in gold:
        parsed = parse(gold, parsing_timeout=None)
    else:
        parsed = parse("\\boxed{" + gold + "}", parsing_timeout=None)
    if not parsed:
        parsed = parse(gold, parsing_timeout=None)
    return tuple(parsed)


def _is_collection(value: Any) -> bool:
    return isinstance(value, (Set, Tuple, MatrixBase))


def _first_math(parsed: tuple[Any, ...]) -> Any:
    for value in parsed:
        if isinstance(value, (Basic, MatrixBase)):
            return value
    return None


def _same(left: tuple[Any, ...], right: tuple[Any, ...], options: dict[str, Any]) -> bool:
    return verify(
        list(left),
        list(right),
        float_rounding=options.get("float_rounding", 6),
        numeric_precision=options.get("numeric_precision", 15),
        strict=options.get("strict", True),
        timeout_seconds=None,
    )


@dataclass(frozen=True)
class Plain:
    """A plain number read without sympy: its exact value and whether it was written as a decimal."""

    value: Fraction
    decimal: bool


def read_plain(text: str) -> Plain | None:
    """``text`` as a plain number (see ``_SIMPLE``), or None when it is anything else."""
    text = text.strip()
    if len(text) > 200:
        return None
    match = _SIMPLE.fullmatch(text)
    if match is None:
        words = _WORDS_THEN_NUMBER.fullmatch(text)
        if words is None:
            return None
        prefix = words["words"].rstrip()
        if words["number"][0] in "+-" and prefix and not prefix.endswith(("=", ":")):
            return None  # "x -5" may be the expression x - 5
        match = _SIMPLE.fullmatch(words["number"])
        if match is None:
            return None
    if match["top"] is not None:
        if int(match["bottom"]) == 0:
            return None
        value = Fraction(int(match["top"]), int(match["bottom"]))
        return Plain(-value if match["sign"] else value, decimal=False)
    number = match["number"].replace(",", "")
    denominator = int(match["denominator"]) if match["denominator"] is not None else 1
    if denominator == 0 or ("." in number and match["denominator"] is not None):
        return None
    return Plain(Fraction(number) / denominator, decimal="." in number)


def plain_equal(left: Plain, right: Plain, float_rounding: int) -> bool | None:
    """Whether two plain numbers are equal under math-verify's rules; None when it is not clear-cut.

    Exact values that agree are equal. Without a decimal on either side values are exact, so a
    difference is final. With a decimal, math-verify rounds to ``float_rounding`` places: values
    further apart than one unit in that place cannot round to the same number.
    """
    if left.value == right.value:
        return True
    if not (left.decimal or right.decimal):
        return False
    if abs(left.value - right.value) > Fraction(1, 10**float_rounding):
        return False
    return None


def _shown(candidate: str) -> str:
    return candidate if len(candidate) <= 120 else candidate[:117] + "..."


@dataclass(frozen=True)
class _Answer:
    """One candidate final answer: its text, and its value as a plain number or as parsed math."""

    text: str
    latex: bool
    plain: Plain | None = None

    def parsed(self) -> tuple[Any, ...]:
        return _parse_candidate(self.text, self.latex)


def normalise_signs(text: str) -> str:
    """``text`` with every minus sign as ``-`` and no percent signs (see the module docstring)."""
    if not text.isascii():
        text = text.translate(_MINUS_SIGNS)
    if "%" in text or "ercent" in text or "ERCENT" in text:
        text = _PERCENT.sub("", text)
    return text


def _unwrap_text(candidate: str) -> str:
    """``candidate`` with each ``\\text{...}`` replaced by its words; parentheses in the words are
    prose ("7 \\text{ (or 8)}"), not brackets of an interval, so they become spaces."""
    return _TEXT_BLOCK.sub(lambda m: " " + m.group(1).replace("(", " ").replace(")", " ") + " ", candidate)


def _top_level_parts(candidate: str) -> list[str]:
    """``candidate`` split at the alternative separators that lie outside every bracket."""
    depths = bracket_depths(candidate)
    parts, start = [], 0
    for separator in _ALTERNATIVES.finditer(candidate):
        if separator.start() < len(depths) and depths[separator.start()] == 0 and separator.start() >= start:
            parts.append(candidate[start : separator.start()])
            start = separator.end()
    parts.append(candidate[start:])
    return parts


def written_number(candidate: str) -> str | None:
    """The number ``candidate`` writes out, without its words, units and typesetting; None when
    ``candidate`` is anything else, such as an expression that evaluates to a number."""
    text = _SPACING.sub(" ", _JOINING.sub("", _unwrap_text(candidate))).replace("{,}", ",")
    text = text.rpartition("=")[2]  # "x = 42" and "37 \cdot 43 = 1591" answer with their last side
    match = _LITERAL.fullmatch(text.strip()) if len(text) <= 200 else None
    return match["number"].strip() if match else None


def _alternatives(candidate: str, latex: bool) -> list[_Answer]:
    """Each part of a candidate that reads as math, split at "or", ";", ", " and between bare numbers
    (inside ``\\text{...}`` too, never inside brackets)."""
    parts = [p.strip() for p in _top_level_parts(_unwrap_text(candidate)) if p and p.strip()]
    if len(parts) <= 1:  # one answer: read as written, its \text{...} units included
        parts = [candidate.strip()]
    answers = [_Answer(part, latex, read_plain(part)) for part in parts]
    return [a for a in answers if a.plain is not None or a.parsed()]


def _read(candidates: list[str], latex: bool, scalar_gold: bool) -> list[_Answer]:
    answers: list[_Answer] = []
    for candidate in dict.fromkeys(candidates):
        plain = read_plain(candidate)
        if plain is not None:
            answers.append(_Answer(candidate, latex, plain))
        elif scalar_gold:
            answers.extend(_alternatives(candidate, latex))
        elif _parse_candidate(candidate, latex):
            answers.append(_Answer(candidate, latex))
    return answers


def _equivalent(left: _Answer, right: _Answer, options: dict[str, Any]) -> bool:
    if left.plain is not None and right.plain is not None:
        same = plain_equal(left.plain, right.plain, options.get("float_rounding", 6))
        if same is not None:
            return same
    a, b = left.parsed(), right.parsed()
    return _same(a, b, options) or _same(b, a, options)


def _distinct(answers: list[_Answer], options: dict[str, Any]) -> list[_Answer]:
    """The answers that are not equivalent to an earlier one."""
    kept: list[_Answer] = []
    for answer in answers:
        if not any(_equivalent(answer, other, options) for other in kept):
            kept.append(answer)
    return kept


def _correct(gold: str, gold_plain: Plain | None, answer: _Answer, options: dict[str, Any]) -> bool:
    if _squeeze(answer.text) == _squeeze(gold):
        return True
    if gold_plain is not None and answer.plain is not None:
        same = plain_equal(gold_plain, answer.plain, options.get("float_rounding", 6))
        if same is not None:
            return same
    gold_parsed, parsed = parse_gold(gold), answer.parsed()
    same_set = _same_solution_set((_first_math(gold_parsed), gold), (_first_math(parsed), answer.text), options)
    if same_set is not None:
        return same_set
    if _interval_like(_first_math(gold_parsed)) != _interval_like(_first_math(parsed)):
        return False
    if _numerically_apart(_first_math(gold_parsed), _first_math(parsed), options.get("float_rounding", 6)):
        return False
    return _same(gold_parsed, parsed, options)


def _same_solution_set(gold: tuple[Any, str], answer: tuple[Any, str], options: dict[str, Any]) -> bool | None:
    """Whether two answers, each ``(parsed value, text)``, that each describe a set of reals (an
    interval, ``x \\in`` one, an inequality) describe the same one; None when either is no such
    answer."""
    gold_set, answer_set = solution_set(*gold), solution_set(*answer)
    if gold_set is None or answer_set is None:
        return None
    (want, want_variable), (got, got_variable) = gold_set, answer_set
    if options.get("strict", True) and want_variable is not None and got_variable is not None:
        if want_variable != got_variable:
            return False
    return want == got or _same((want,), (got,), options)


def _value_side(side: str, latex: bool) -> _Answer | None:
    """``side`` of an equation as an answer when it is a value: a number, or arithmetic on numbers
    such as ``2+3`` or ``\\frac{10}{2}``. None for anything else: a variable or an expression in
    one, and also functions, units and degree marks (``\\sin 60^\\circ``), whose value a parser
    may read otherwise than the writer meant."""
    answer = _Answer(side, latex, read_plain(side))
    if answer.plain is not None:
        return answer
    if not _ARITHMETIC.fullmatch(side):
        return None
    value = _first_math(answer.parsed())
    return answer if isinstance(value, Expr) and not value.free_symbols and value.is_number else None


def _clashing_sides(answers: list[_Answer], options: dict[str, Any]) -> list[str]:
    """The sides of the first answer that states two different values (``x = 5 = 7``,
    ``2+3 = 6``, ``x = 7 \\Rightarrow x = 5``), or an empty list when all of them agree."""
    for answer in answers:
        by_variable: dict[str, list[_Answer]] = {}
        for sides in equations(answer.text):
            if len(sides) < 2:
                continue
            values = [v for v in (_value_side(side, answer.latex) for side in sides) if v is not None]
            if len(_distinct(values, options)) > 1:
                return [v.text for v in values]
            for name in (side for side in sides if VARIABLE_NAME.fullmatch(side)):
                by_variable.setdefault(name, []).extend(values)
        for name, values in by_variable.items():
            if len(_distinct(values, options)) > 1:
                return [name, *(v.text for v in values)]
    return []


def _interval_like(value: Any) -> bool | None:
    """True for an interval (or a union holding one), False for a finite set, None otherwise."""
    if isinstance(value, Interval) or (isinstance(value, Union) and any(isinstance(a, Interval) for a in value.args)):
        return True
    return False if isinstance(value, FiniteSet) else None


def _squeeze(text: str) -> str:
    return "".join(text.split()).removeprefix("$").removesuffix("$")


def _numerically_apart(gold: Any, answer: Any, float_rounding: int) -> bool:
    """True when two closed-form numbers clearly differ, so slow symbolic checks can be skipped.

    Only for expressions without symbols or percent signs, whose values differ by more than
    math-verify's rounding could ever hide (ten units in the last rounded place, and one part in
    a billion): such values are never equal under any of its rules.
    """
    if not (isinstance(gold, Expr) and isinstance(answer, Expr)):
        return False
    if gold.free_symbols or answer.free_symbols or gold.has(UnevaluatedExpr) or answer.has(UnevaluatedExpr):
        return False
    try:
        a, b = complex(gold.evalf(20)), complex(answer.evalf(20))
    except Exception:  # sympy raises many types on odd input; then the full comparison decides
        return False
    if not all(math.isfinite(x) for x in (a.real, a.imag, b.real, b.imag)):
        return False
    margin = max(10.0 * 10.0**-float_rounding, 1e-9 * max(abs(a), abs(b)))
    return abs(a - b) > margin


def _verdict(reward: float, detail: str, feedback: str) -> dict[str, Any]:
    return {"reward": reward, "passed": reward == 1.0, "detail": detail, "feedback": feedback}


def _expected(gold: str, options: dict[str, Any]) -> str:
    return f" The expected answer is {gold}." if options.get("reveal_expected") else ""


def check_math_answer(request: dict[str, Any]) -> dict[str, Any]:
    """Score one response. ``request``: ``gold``, ``response`` and ``options`` (see MathConfig)."""
    gold, response = normalise_signs(str(request["gold"])), normalise_signs(request["response"])
    options = request.get("options", {})
    where, candidates = final_answers(response, options.get("fallback", "last_line"))
    if not candidates:
        return _verdict(
            0.0, "no final answer found", "No final answer found. End with exactly one final answer in \\boxed{}."
        )
    if any(len(c) > MAX_CANDIDATE_CHARS for c in candidates):
        return _verdict(
            0.0,
            f"final answer longer than {MAX_CANDIDATE_CHARS} characters",
            "Your final answer is far too long; give only the final value.",
        )
    gold_plain = read_plain(gold)
    scalar_gold = gold_plain is not None or _scalar(gold)
    if not scalar_gold and len(candidates) > 1:
        candidates = [", ".join(candidates)]
    answers = _read(candidates, where == "boxed", scalar_gold)
    if not answers:
        shown = _shown(candidates[-1])
        return _verdict(
            0.0,
            f"final answer {shown!r} ({where}) could not be read as math",
            f"Your final answer {shown!r} is not a mathematical value.{_expected(gold, options)}",
        )
    clash = _clashing_sides(answers, options)
    if clash:
        shown = " = ".join(_shown(side) for side in clash[:4])
        return _verdict(
            0.0,
            f"final answer states two different values: {shown}",
            f"Your final answer {shown} gives two different values; an answer that says two things says"
            f" neither. Give one value.{_expected(gold, options)}",
        )
    distinct = _distinct(answers, options)
    if len(distinct) > 1:
        shown = ", ".join(_shown(a.text) for a in distinct[:4])
        return _verdict(
            0.0,
            f"several different final answers: {shown}",
            f"You gave several different final answers ({shown}); give exactly one.",
        )
    answer = answers[0]
    shown = _shown(answer.text)
    if gold_plain is not None and answer.plain is None:
        number = written_number(answer.text)
        if number is None:
            return _verdict(
                0.0,
                f"final answer {shown!r} ({where}) is an expression, not a number worked out",
                f"Your final answer {shown} is not worked out; give its value as a number.{_expected(gold, options)}",
            )
        # Read without its units and typesetting ("1\\,591", "30°"), which math-verify can misread.
        answer = _Answer(answer.text, answer.latex, read_plain(number.strip("()")))
    if _correct(gold, gold_plain, answer, options):
        return _verdict(1.0, f"final answer {shown!r} ({where}) equals the gold answer", "Correct.")
    return _verdict(
        0.0,
        f"final answer {shown!r} ({where}) differs from the gold answer {gold!r}",
        f"Your final answer {shown} is not correct.{_expected(gold, options)}",
    )


def _scalar(gold: str) -> bool:
    """Whether the gold answer is one value (not a set, tuple, interval or matrix); parses it."""
    value = _first_math(parse_gold(gold))
    if value is None:
        raise ValueError(f"the gold answer {gold!r} could not be parsed as math")
    return not _is_collection(value)
