"""Whether an answer commits to a solution: non-answers that lenient scorers pay for.

Scorers that give partial credit (reasoning-gym's default pays ``len(gold) / len(answer)``,
many pay 0.01 or 0.05 for any text "in the right format", fuzzy ones pay for overlap) also pay
answers that say nothing about the problem: the question given back, a statement true of
anything, an empty answer. ``commitment_problem`` names the forms that say nothing:

- ``empty``: no letter or digit at all, or a placeholder (``None``, ``unknown``, ``the answer``);
- ``tautology``: sides that are the same text joined by ``=``, ``is``, ``equals``, ...
  (``x = x``, ``the answer is the answer``);
- ``restated question``: at least ``RESTATED_MIN_WORDS`` words that run, in order, through
  the question's own text;
- ``question's numbers``: nothing but numbers (at least two) and separators, the numbers a run
  of the question's own numbers in its order.

A rule never refuses the gold: when the gold itself would be refused by a rule (a board that
is already stable, a list that is already sorted, an honest answer of ``None``), that rule is
skipped for the task. ``non_answers`` gives the probes a scorer is tried with, to learn whether
it pays for non-answers at all. Standard library only (it also runs in the check process); every
pattern is linear in the answer's length.
"""

from __future__ import annotations

import re
from collections.abc import Callable

RESTATED_MIN_WORDS = 6
PLACEHOLDERS = frozenset(
    {
        "none",
        "null",
        "nil",
        "n a",
        "unknown",
        "undefined",
        "answer",
        "the answer",
        "my answer",
        "final answer",
        "the final answer",
        "no answer",
        "idk",
        "i don t know",
    }
)
_WORD = re.compile(r"\w+")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_SEPARATORS = frozenset(" \t\r\n,;[](){}")
_EQUATES = tuple(
    re.compile(pattern, re.IGNORECASE)
    for pattern in (r"==|=|≡|<=>|<->|↔", r"\bis equal to\b", r"\bequals\b", r"\bis the same as\b", r"\bis\b")
)
"""Ways to say two things are the same, each tried on its own (a side may hold another: ``A is B = A is B``)."""


def _words(text: str) -> str:
    """``text`` as its lower-case words, each followed by one space."""
    return "".join(word + " " for word in _WORD.findall(text.lower()))


def _run_of(items: list[str], within: list[str]) -> bool:
    """Whether ``items`` occur in ``within`` one after another."""
    return f"\x00{chr(0).join(items)}\x00" in f"\x00{chr(0).join(within)}\x00"


def is_empty(text: str, question: str) -> bool:
    """No letter or digit, or a placeholder word."""
    return not _WORD.search(text) or _words(text).strip() in PLACEHOLDERS


def _same_sides(text: str, equates: re.Pattern[str]) -> bool:
    sides = equates.split(text)
    shapes = {re.sub(r"\s+", "", side.lower()).strip(".!") for side in sides}
    return len(sides) >= 2 and len(shapes) == 1 and shapes != {""}


def is_tautology(text: str, question: str) -> bool:
    """Two or more sides, joined by ``=``, ``is``, ``equals``..., that are the same text."""
    return any(_same_sides(text, equates) for equates in _EQUATES)


def restates_question(text: str, question: str) -> bool:
    """At least ``RESTATED_MIN_WORDS`` words that run through the question's text in order."""
    words = _words(text)
    return words.count(" ") >= RESTATED_MIN_WORDS and f" {words}" in f" {_words(question)}"


def _number_run(text: str, question: str) -> bool:
    numbers = _NUMBER.findall(text)
    return len(numbers) >= 2 and _run_of(numbers, _NUMBER.findall(question))


def gives_back_numbers(text: str, question: str) -> bool:
    """Only numbers (two or more) and separators, the numbers a run of the question's numbers."""
    return set(_NUMBER.sub("", text)) <= _SEPARATORS and _number_run(text, question)


Rule = Callable[[str, str], bool]
"""``rule(text, question) -> whether text is that kind of non-answer``."""

RULES: dict[str, tuple[Rule, Rule]] = {
    "an empty answer or a placeholder": (is_empty, is_empty),
    "a tautology, true of anything": (is_tautology, is_tautology),
    "the question's own text given back": (restates_question, restates_question),
    # An honest answer may be numbers of the question in its order (a filtered or an already
    # sorted list): whenever the gold's numbers are such a run, the rule is skipped.
    "the question's own numbers given back": (gives_back_numbers, _number_run),
}
"""Non-answer forms: ``{what it is: (rule for the answer, rule that exempts a task by its gold)}``."""


def commitment_problem(answer: str, question: str, gold: str | None) -> str | None:
    """What kind of non-answer ``answer`` is (see the module docstring), or None when it commits."""
    for what, (rule, exempting) in RULES.items():
        if rule(answer, question) and not (gold is not None and exempting(gold, question)):
            return what
    return None


def non_answers(question: str) -> list[tuple[str, str]]:
    """``(what, text)`` probes that answer nothing: a scorer that pays any of them pays for form, not progress."""
    numbers = _NUMBER.findall(question)
    probes = [
        ("the restated question", question.strip()),
        ("a tautology", "x = x"),
        ("a tautology", "the answer is the answer"),
        ("an empty answer", ""),
        ("a placeholder", "None"),
        ("punctuation", "."),
    ]
    return probes + ([("the question's numbers", " ".join(numbers))] if numbers else [])
