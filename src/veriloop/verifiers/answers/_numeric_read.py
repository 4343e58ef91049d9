"""Reading named numbers out of an answer, keeping every statement of each name.

An answer may state a value several times: in ``name: value`` lines, in table rows, in one or
more JSON objects (fenced or not), a key twice in one object. A lenient reader keeps one of
them (``json.loads`` keeps the last copy of a key; a reader of "the JSON block" ignores the
lines around it), and so credits whichever statement happens to match. Here nothing is
collapsed: every statement of a wanted name comes back, so the verifier can require that they
all agree.

Two things are told apart from a value:

* a period label next to it (``FY2023``, ``(FY24)``, ``in fiscal 2023``, ``Q3 2024``,
  ``(2023)``): a label, not a second number, so it is dropped before numbers are read;
* a bound or an approximation instead of it (``>= 10``, ``< 5``, ``at least 12``,
  ``between 10 and 20``, ``~12``, ``12 or more``): not a value at all, so it is kept as the
  reading's ``bound`` and the verifier refuses it.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from veriloop.verifiers.answers._tags import tag_contents

_FINAL_MARK = re.compile(r"final answer", re.IGNORECASE)
_FENCED = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n(.*?)```", re.DOTALL)
_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s+")
# Where a name ends and its value starts; a comparison sign is kept with the value it qualifies.
_SEPARATOR = re.compile(
    r"(?P<arrow>->|=>|\u2192|\s\u2014\s)|(?P<compare>[<>\u2264\u2265\u2248\u2a7d\u2a7e~])|[:=]|\s(?:is|was|were|are)\s",
    re.IGNORECASE,
)
_NUMBER = re.compile(
    r"(?P<open>\()?\s*(?P<sign>[-+\u2212\u2013])?\s*[$\u20ac\u00a3\u00a5]?\s*(?P<sign2>[-+\u2212])?\s*"
    r"(?P<digits>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?:[eE](?P<exponent>[-+]?\d+))?"
    r"\s*(?P<percent>%)?\s*(?P<close>\))?"
)
_MINUS = ("-", "\u2212", "\u2013")
_YEAR = r"'?(?:(?:19|20)\d{2}|\d{2})\b(?:\s*[-/\u2013]\s*'?\d{2,4}\b)?"  # 2023, '23, 2023/24, 2022-23
_FULL_YEAR = r"(?:19|20)\d{2}\b"
_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?"
# Period labels: FY2023, FY 24, FY2022/23, CY2023, fiscal (year) 2023, Q3 (2024), 3Q24, H1 2024,
# 1H24, dates (Dec 31, 2023; 31 December 2023; 2023-12-31; Dec 2023), and a bare year in
# parentheses or after "in", "for", "during", "as of", "year ended".
_PERIOD_LABEL = re.compile(
    "|".join(
        (
            r"\(\s*(?:(?:FY|CY)\s*" + _YEAR + "|" + _FULL_YEAR + r")\s*\)",
            r"\b(?:FY|CY)\s*" + _YEAR,
            r"\b(?:fiscal|financial)(?:\s+year)?\s+" + _YEAR,
            r"\b[QH][1-4](?:\s*(?:FY\s*)?" + _YEAR + r")?(?!\w)",
            r"\b[1-4][QH]\s*" + _YEAR,
            r"\b" + _MONTH + r"\s+(?:\d{1,2}(?:st|nd|rd|th)?,?\s+)?" + _FULL_YEAR,
            # a day first only after a word or "(": in "12 March 2023" the 12 is the value
            r"(?:(?<=\()|(?<=[A-Za-z,]\s))\d{1,2}(?:st|nd|rd|th)?\s+" + _MONTH + r"\s+" + _FULL_YEAR,
            r"\b" + _FULL_YEAR + r"-\d{2}-\d{2}\b",
            r"\b(?:in|for|during|as\s+of|year\s+ended|ended)\s+(?:(?:the\s+)?year\s+)?" + _FULL_YEAR,
        )
    ),
    re.IGNORECASE,
)
# A bound or an approximation written where a value belongs: ">= 10", "at least 12", "~12", "12+".
_BOUND = re.compile(
    r"(?P<before>>=|<=|=>|=<|[<>\u2264\u2265\u2248\u2a7d\u2a7e~]|\+/-|\u00b1"
    r"|\b(?:at\s+(?:least|most)|(?:more|less|greater|fewer)\s+than|no\s+(?:more|less)\s+than|up\s+to"
    r"|over|under|above|below|exceed(?:s|ing)?|nearly|almost|approx(?:imately|\.)?|about|around|roughly"
    r"|circa|between)\b)\s*\(?\s*[-+\u2212]?\s*[$\u20ac\u00a3\u00a5]?\s*[-+\u2212]?\s*\.?\d"
    r"|\d\s*%?[\s(]*(?P<after>\+(?!\s*[$(.\d/])|\b(?:or\s+(?:more|less|higher|lower|above|below|greater|fewer|so)"
    r"|approx(?:imately)?|roughly)\b)",
    re.IGNORECASE,
)
_LINE_OBJECT = re.compile(r"^[ \t]*\{", re.MULTILINE)
MAX_SCOPE_CHARS = 100_000
MAX_LINE_OBJECTS = 20  # object starts tried: bounds the work on hostile text


@dataclass(frozen=True)
class NamedReading:
    """One statement of a named value: the numbers it holds (exactly one for a clean value) and,
    when it states a bound or an approximation instead of a value, the words or sign that say so."""

    numbers: tuple[float, ...]
    bound: str = ""


def normalise_name(name: str) -> str:
    """``"Gross margin (Q3)"`` -> ``"gross_margin_q3"``: case, spacing and punctuation ignored."""
    return "_".join(re.findall(r"[0-9a-z]+", name.casefold()))


def drop_period_labels(text: str) -> str:
    """``text`` without the fiscal-year and period labels it holds (see the module docstring);
    each becomes a space, so a caller matching ``_NUMBER`` collapses spaces afterwards."""
    return _PERIOD_LABEL.sub(" ", " ".join(text.split())) if re.search(r"\d", text) else text


def read_numbers(text: str, percent: str = "as_written") -> list[float]:
    """Every number written in ``text``, period labels aside: ``$1,234.50`` is 1234.5,
    ``(1,234)`` is -1234, ``12.5%`` is 12.5 (0.125 with ``percent="as_fraction"``)."""
    numbers = []
    # single spaces (labels dropped first, as they leave spaces) keep the pattern linear on hostile input
    text = " ".join(drop_period_labels(text).split())
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


def read_value(text: str, percent: str = "as_written") -> NamedReading:
    """The numbers of one written value and the bound it states instead, if it does."""
    bound = _BOUND.search(" ".join(drop_period_labels(text).split()))
    shown = (bound["before"] or bound["after"]).strip() if bound else ""
    return NamedReading(tuple(read_numbers(text, percent)), " ".join(shown.split()))


def answer_scope(response: str) -> str:
    """The part of a response that holds its answer: every ``<answer>`` tag (two tags are two
    answers, both read), else what follows the last "final answer", else the whole response."""
    tagged = tag_contents(response)
    if tagged:
        return "\n".join(tagged)
    marks = list(_FINAL_MARK.finditer(response))
    if marks:
        return response[marks[-1].end() :]
    return response


def key_value_pairs(pairs: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """``object_pairs_hook`` that keeps every key of a JSON object, a repeated one included."""
    return pairs


_LINE_DECODER = json.JSONDecoder(object_pairs_hook=key_value_pairs)


def _is_pairs(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(p, tuple) and len(p) == 2 for p in value)


def _python_pairs(text: str) -> list[tuple[Any, Any]] | None:
    """The key-value pairs of a Python dict literal such as ``str()`` of a mapping prints, each
    repeated key kept (literals only, never code)."""
    if len(text) > 20_000:
        return None
    try:
        node = ast.parse(text.strip(), mode="eval").body
        if not isinstance(node, ast.Dict) or any(key is None for key in node.keys):
            return None
        return [(ast.literal_eval(k), ast.literal_eval(v)) for k, v in zip(node.keys, node.values)]
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def _parse_object(text: str) -> list[tuple[Any, Any]] | None:
    if not text.startswith("{"):
        return None
    try:
        value = json.loads(text, object_pairs_hook=key_value_pairs)
    except (ValueError, RecursionError):
        value = _python_pairs(text)
    return value if value is not None and _is_pairs(value) else None


def _objects(scope: str) -> tuple[list[list[tuple[Any, Any]]], str]:
    """Every answer object (the scope itself when it is one, each fenced block holding one, each
    object that starts a line), and the text of the scope outside them, read as lines."""
    bare = _parse_object(scope.strip().lstrip(":").strip())
    if bare is not None:
        return [bare], ""
    found: list[list[tuple[Any, Any]]] = []

    def take(block: re.Match[str]) -> str:
        obj = _parse_object(block[1].strip())
        if obj is None:
            return block[0]
        found.append(obj)
        return "\n"

    rest = _FENCED.sub(take, scope)
    kept, end = [], 0
    for start in [m.end() - 1 for m in _LINE_OBJECT.finditer(rest)][:MAX_LINE_OBJECTS]:
        if start < end:
            continue  # inside an object already read
        try:
            value, stop = _LINE_DECODER.raw_decode(rest, start)
        except (ValueError, RecursionError):
            continue
        if _is_pairs(value):
            found.append(value)
            kept.append(rest[end:start])
            end = stop
    return found, "".join(kept) + rest[end:]


def _json_reading(value: Any, percent: str) -> NamedReading:
    if isinstance(value, bool) or value is None:
        return NamedReading(())
    if isinstance(value, (int, float)):
        return NamedReading((float(value),))
    if isinstance(value, str):
        return read_value(value, percent)
    if isinstance(value, list) and not _is_pairs(value):
        return NamedReading(tuple(n for item in value for n in (read_numbers(str(item), percent) or [math.nan])))
    return NamedReading(())


def _line_pairs(scope: str, percent: str) -> Iterator[tuple[str, NamedReading]]:
    for raw in scope.splitlines():
        line = _BULLET.sub("", raw.replace("**", "").replace("`", "")).strip()
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if len(cells) >= 2:
                yield cells[0], read_value(" | ".join(cells[1:]), percent)
            continue
        separator = _SEPARATOR.search(line)
        if separator and line[: separator.start()].strip():
            value_starts = separator.start() if separator["compare"] else separator.end()
            yield line[: separator.start()], read_value(line[value_starts:], percent)


def named_readings(response: str, names: list[str], percent: str = "as_written") -> dict[str, list[NamedReading]]:
    """For each wanted name, every statement of it in the answer: the lines and table rows of
    the answer scope and every JSON object in it, each repeated key kept. Names are
    compared as ``normalise_name`` writes them; a written name that is no wanted one is tried
    again without its period labels ("Revenue (FY2023)" states "revenue")."""
    wanted = {normalise_name(name): name for name in names}
    scope = answer_scope(response)[-MAX_SCOPE_CHARS:]
    objects, rest = _objects(scope)
    pairs = [(str(key), _json_reading(value, percent)) for obj in objects for key, value in obj]
    found: dict[str, list[NamedReading]] = {}
    for key, reading in [*pairs, *_line_pairs(rest, percent)]:
        name = wanted.get(normalise_name(key)) or wanted.get(normalise_name(drop_period_labels(key)))
        if name is not None:
            found.setdefault(name, []).append(reading)
    return found
