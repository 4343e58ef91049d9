"""The order in which training tasks are drawn: shuffled epochs with a resumable cursor."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from veriloop.core import Task


@dataclass
class SamplerState:
    epoch: int = 0
    position: int = 0
    drawn: int = 0


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
