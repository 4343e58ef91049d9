"""Overlap between a training set and an eval set: prompts and gold answers.

Prompts overlap as in ``veriloop.tasks.contamination``: the same normalised question, or a
shared run of ``ngram`` words. Gold answers overlap when they share a run of ``ngram`` words;
golds shorter than that (a number, a word) are not compared, since short answers coincide by
chance. The report also gives the share of the eval set's word runs seen in the training set.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from veriloop.core import Task
from veriloop.tasks import Overlap, contamination, normalise_text, question_text

DEFAULT_NGRAM = 8


def _gold_text(task: Task) -> str:
    if task.gold is None:
        return ""
    return normalise_text(task.gold if isinstance(task.gold, str) else json.dumps(task.gold, sort_keys=True))


def _runs(text: str, n: int) -> set[tuple[str, ...]]:
    words = text.split()
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def _seen_fraction(train_texts: Iterable[str], eval_texts: Iterable[str], n: int) -> float:
    seen: set[tuple[str, ...]] = set()
    for text in train_texts:
        seen |= _runs(text, n)
    total = hits = 0
    for text in eval_texts:
        runs = _runs(text, n)
        total += len(runs)
        hits += len(runs & seen)
    return hits / total if total else 0.0


@dataclass(frozen=True)
class OverlapReport:
    """Eval tasks whose prompt or gold answer overlaps the training set."""

    train_size: int
    eval_size: int
    ngram: int
    prompt_overlaps: tuple[Overlap, ...]
    gold_overlaps: tuple[Overlap, ...]
    prompt_ngram_fraction: float
    gold_ngram_fraction: float

    @property
    def overlapping_ids(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(o.heldout_id for o in self.prompt_overlaps + self.gold_overlaps))

    @property
    def fraction(self) -> float:
        """Share of eval tasks with any overlap."""
        return len(self.overlapping_ids) / self.eval_size if self.eval_size else 0.0

    @property
    def clean(self) -> bool:
        return not self.overlapping_ids

    def to_dict(self) -> dict[str, object]:
        return {
            "train_size": self.train_size,
            "eval_size": self.eval_size,
            "ngram": self.ngram,
            "overlapping": len(self.overlapping_ids),
            "fraction": round(self.fraction, 6),
            "prompt_ngram_fraction": round(self.prompt_ngram_fraction, 6),
            "gold_ngram_fraction": round(self.gold_ngram_fraction, 6),
            "prompt_overlaps": [o.__dict__ for o in self.prompt_overlaps],
            "gold_overlaps": [o.__dict__ for o in self.gold_overlaps],
        }

    def warning(self) -> str | None:
        """One line for people when anything overlaps, else None."""
        if self.clean:
            return None
        return (
            f"{len(self.overlapping_ids)} of {self.eval_size} eval tasks ({self.fraction:.1%}) overlap the "
            f"{self.train_size} training tasks ({len(self.prompt_overlaps)} by prompt, "
            f"{len(self.gold_overlaps)} by gold answer; {self.ngram}-word runs)"
        )


def overlap(train: Iterable[Task], eval_tasks: Iterable[Task], ngram: int = DEFAULT_NGRAM) -> OverlapReport:
    """Compare an eval set with a training set by prompts and by gold answers."""
    if ngram < 1:
        raise ValueError("ngram must be at least 1")
    train, eval_tasks = list(train), list(eval_tasks)
    prompts = contamination(train, eval_tasks, ngram=ngram)
    first_train_id: dict[tuple[str, ...], str] = {}
    for task in train:
        for run in _runs(_gold_text(task), ngram):
            first_train_id.setdefault(run, task.id)
    gold_overlaps = []
    for task in eval_tasks:
        shared = next((run for run in _runs(_gold_text(task), ngram) if run in first_train_id), None)
        if shared is not None:
            gold_overlaps.append(Overlap(task.id, first_train_id[shared], f"gold shares a {ngram}-word run"))
    return OverlapReport(
        train_size=len(train),
        eval_size=len(eval_tasks),
        ngram=ngram,
        prompt_overlaps=prompts.overlaps,
        gold_overlaps=tuple(gold_overlaps),
        prompt_ngram_fraction=_seen_fraction(
            (normalise_text(question_text(t)) for t in train),
            (normalise_text(question_text(t)) for t in eval_tasks),
            ngram,
        ),
        gold_ngram_fraction=_seen_fraction((_gold_text(t) for t in train), (_gold_text(t) for t in eval_tasks), ngram),
    )
