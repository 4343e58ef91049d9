"""Which tasks a run trains on, and the order they are drawn in: shuffled epochs with a resumable cursor."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from veriloop.core import Task, UserError
from veriloop.scheduling import DomainSchedule
from veriloop.tasks import load_tasks
from veriloop.training._config import TrainConfig


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and torch's global generators (a run's initialisation and dropout)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


@dataclass
class SamplerState:
    """A ``TaskSampler``'s cursor."""

    epoch: int = 0  # passes over the tasks begun (each in its own seeded order)
    position: int = 0  # tasks drawn in the current pass
    drawn: int = 0  # tasks drawn in all


class TaskSampler:
    """Draws tasks epoch by epoch in a seeded shuffled order; its state is a checkpointable cursor."""

    def __init__(self, tasks: Sequence[Task], seed: int, state: SamplerState | None = None):
        if not tasks:
            raise ValueError("no tasks to sample from")
        self.tasks = list(tasks)
        self.seed = seed
        self.state = state or SamplerState()
        self._order = self._permutation(self.state.epoch)

    def _permutation(self, epoch: int) -> list[int]:
        order = list(range(len(self.tasks)))
        random.Random(self.seed * 1_000_003 + epoch).shuffle(order)
        return order

    def next(self, count: int) -> list[Task]:
        out = []
        for _ in range(count):
            if self.state.position >= len(self._order):
                self.state.epoch += 1
                self.state.position = 0
                self._order = self._permutation(self.state.epoch)
            out.append(self.tasks[self._order[self.state.position]])
            self.state.position += 1
            self.state.drawn += 1
        return out

    def load_state(self, data: Mapping[str, Any]) -> None:
        """Continue from a checkpoint's ``dataclasses.asdict(state)``."""
        if set(data) != {field.name for field in dataclasses.fields(SamplerState)}:
            raise UserError(
                "the checkpoint's data position is a multi-domain schedule's (it was saved with a schedule "
                "section); resume with the settings it was saved with, or use another run.out"
            )
        self.state = SamplerState(**data)
        self._order = self._permutation(self.state.epoch)


def training_tasks(
    config: TrainConfig, tasks: Sequence[Task] | None, heldout: Sequence[Task] | None
) -> tuple[list[Task], list[Task], DomainSchedule | None]:
    """The run's training tasks, held-out tasks and multi-domain schedule (None without one).

    Tasks given in Python replace ``data.train`` and ``data.heldout``; the schedule
    (``veriloop.scheduling``), when configured, loads its mixture and replaces ``TaskSampler``.
    """
    data = config.data
    held = list(heldout) if heldout is not None else (load_tasks(data.heldout) if data.heldout else [])
    if not config.schedule.active:
        return (list(tasks) if tasks is not None else load_tasks(data.train)), held, None
    schedule = DomainSchedule.from_config(
        config.schedule, config.run.seed, config.run.out, tasks=tasks, train=data.train, heldout=held
    )
    return schedule.tasks, held, schedule
