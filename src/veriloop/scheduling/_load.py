"""Reading a mixture's task files: every file's tasks, the weight of each domain, held-out sets."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from veriloop.core import Task, UserError
from veriloop.scheduling._config import MixtureEntry
from veriloop.tasks import load_tasks


@dataclass(frozen=True)
class MixtureData:
    """The loaded mixture: training tasks, the configured weight per domain, held-out tasks."""

    tasks: tuple[Task, ...]
    weights: dict[str, float | None]
    heldout: tuple[Task, ...]


def _unique(tasks: list[Task], source: str, origin: dict[str, str]) -> None:
    for task in tasks:
        if task.id in origin:
            raise UserError(
                f"{source}: task id {task.id!r} is also in {origin[task.id]}; ids must be unique across the mixture"
            )
        origin[task.id] = source


def load_mixture(entries: Sequence[MixtureEntry]) -> MixtureData:
    """Load every entry; a domain split over two files or an id repeated is a UserError."""
    tasks: list[Task] = []
    heldout: list[Task] = []
    weights: dict[str, float | None] = {}
    domain_file: dict[str, str] = {}
    train_ids: dict[str, str] = {}
    heldout_ids: dict[str, str] = {}
    for entry in entries:
        loaded = load_tasks(entry.path)
        _unique(loaded, entry.path, train_ids)
        for domain in sorted({t.domain for t in loaded}):
            if domain in domain_file:
                raise UserError(
                    f"{entry.path}: domain {domain!r} is also in {domain_file[domain]}; "
                    "keep each domain's training tasks in one mixture entry"
                )
            domain_file[domain] = entry.path
            weights[domain] = entry.weight
        tasks += loaded
        if entry.heldout:
            held = load_tasks(entry.heldout)
            _unique(held, entry.heldout, heldout_ids)
            heldout += held
    return MixtureData(tuple(tasks), weights, tuple(heldout))
