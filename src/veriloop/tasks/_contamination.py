"""Contamination checks between task sets (a train split and a held-out split, say).

Two tasks overlap when their prompts are the same after normalisation (Unicode NFKC, case,
punctuation and spacing ignored; digits and math symbols kept), or, with ``ngram``, when
their questions share a run of that many words. The question of a task is its last user
message.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

from veriloop.core import Task

_TOKEN = re.compile(r"\d+(?:\.\d+)?|[^\W\d_]+|[+\-*/^=<>()\[\]{}%]")


def normalise_text(text: str) -> str:
    """Text as space-separated tokens (words, numbers, math symbols); case and punctuation dropped.

    ``"What is 3.5+2?"`` and ``"what is 3.5 + 2"`` both give ``"what is 3.5 + 2"``.
    """
    return " ".join(_TOKEN.findall(unicodedata.normalize("NFKC", text).casefold()))


def question_text(task: Task) -> str:
    """The last user message of a task's prompt (the whole prompt when it is plain text)."""
    if isinstance(task.prompt, str):
        return task.prompt
    users = [m.content for m in task.prompt if m.role == "user"]
    return users[-1] if users else task.prompt[-1].content


@dataclass(frozen=True)
class Overlap:
    """One held-out task that also appears in the training set."""

    heldout_id: str
    train_id: str
    how: str  # "same question" or "shared N-word run"


@dataclass(frozen=True)
class ContaminationReport:
    """Every held-out task that overlaps the training set, and the sizes compared."""

    train_size: int
    heldout_size: int
    overlaps: tuple[Overlap, ...]

    @property
    def contaminated_ids(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(o.heldout_id for o in self.overlaps))

    @property
    def fraction(self) -> float:
        """Share of held-out tasks that overlap the training set."""
        return len(self.contaminated_ids) / self.heldout_size if self.heldout_size else 0.0

    @property
    def clean(self) -> bool:
        return not self.overlaps

    def to_dict(self) -> dict[str, object]:
        return {
            "train_size": self.train_size,
            "heldout_size": self.heldout_size,
            "contaminated": len(self.contaminated_ids),
            "fraction": round(self.fraction, 6),
            "overlaps": [o.__dict__ for o in self.overlaps],
        }


def _ngrams(text: str, n: int) -> set[tuple[str, ...]]:
    words = text.split()
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def contamination(train: Iterable[Task], heldout: Iterable[Task], ngram: int | None = None) -> ContaminationReport:
    """Held-out tasks whose normalised question equals a training one (or shares an ``ngram``-word run)."""
    train, heldout = list(train), list(heldout)
    by_question: dict[str, str] = {}
    by_ngram: dict[tuple[str, ...], str] = {}
    for task in train:
        text = normalise_text(question_text(task))
        by_question.setdefault(text, task.id)
        if ngram:
            for gram in _ngrams(text, ngram):
                by_ngram.setdefault(gram, task.id)
    overlaps = []
    for task in heldout:
        text = normalise_text(question_text(task))
        if text in by_question:
            overlaps.append(Overlap(task.id, by_question[text], "same question"))
            continue
        if ngram:
            shared = next((gram for gram in _ngrams(text, ngram) if gram in by_ngram), None)
            if shared is not None:
                overlaps.append(Overlap(task.id, by_ngram[shared], f"shared {ngram}-word run"))
    return ContaminationReport(len(train), len(heldout), tuple(overlaps))


def decontaminate(tasks: Iterable[Task], against: Iterable[Task], ngram: int | None = None) -> list[Task]:
    """``tasks`` without those that overlap ``against`` (order kept)."""
    tasks = list(tasks)
    dirty = set(contamination(against, tasks, ngram).contaminated_ids)
    return [task for task in tasks if task.id not in dirty]
