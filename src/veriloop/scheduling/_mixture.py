"""A task mixture: several domains drawn in target shares, deterministic given a seed.

Each draw goes to the domain with the most credit: every draw adds each active domain's share
to its credit and takes one from the chosen domain's (smooth weighted round robin). Over any
stretch of draws a domain's count stays within a couple of draws of its share, and a change
of weights takes effect from the next draw without a catch-up burst. Within a domain, tasks
come in seeded shuffled epochs, or from a ``Curriculum`` when one is given. The state (shares,
credits, cursors, counts of prompts drawn and trained on) is plain data for checkpoints.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from veriloop.core import Task, UserError
from veriloop.scheduling._curriculum import Curriculum


@dataclass
class MixtureState:
    """Where a mixture stands: current shares, credits, per-domain cursors and counts."""

    weights: dict[str, float] = field(default_factory=dict)  # domain -> target share (sums to 1)
    credits: dict[str, float] = field(default_factory=dict)
    epochs: dict[str, int] = field(default_factory=dict)
    positions: dict[str, int] = field(default_factory=dict)
    drawn: dict[str, int] = field(default_factory=dict)  # domain -> prompts drawn
    trained: dict[str, int] = field(default_factory=dict)  # domain -> prompts trained on


def group_by_domain(tasks: Iterable[Task]) -> dict[str, list[Task]]:
    """Tasks per domain, in their given order; domains sorted by name."""
    grouped: dict[str, list[Task]] = {}
    for task in tasks:
        grouped.setdefault(task.domain, []).append(task)
    return dict(sorted(grouped.items()))


class TaskMixture:
    """Draws tasks across domains in target shares; ``next(n)`` and ``state`` as ``TaskSampler``.

    ``weights`` maps every domain of ``tasks`` to a positive weight (normalised to shares).
    """

    def __init__(
        self,
        tasks: Sequence[Task],
        weights: Mapping[str, float],
        seed: int,
        state: MixtureState | None = None,
        curriculum: Curriculum | None = None,
    ):
        self.domains = group_by_domain(tasks)
        if not self.domains:
            raise ValueError("no tasks to sample from")
        if set(weights) != set(self.domains):
            raise ValueError(f"weights name domains {sorted(weights)}, the tasks have {sorted(self.domains)}")
        self._by_id = {task.id: task for task in tasks}
        if len(self._by_id) != len(tasks):
            raise ValueError("task ids repeat; a mixture needs unique ids")
        self.seed = seed
        self.curriculum = curriculum
        self.state = state or self._initial_state(weights)
        if set(self.state.weights) != set(self.domains):
            raise UserError(
                f"the saved mixture state has domains {sorted(self.state.weights)}, the tasks have "
                f"{sorted(self.domains)}; resume with the task files the run started with, or use another run.out"
            )
        self._orders: dict[str, tuple[int, list[int]]] = {}  # domain -> (epoch, permutation)
        # The curriculum's tie order: each domain's first shuffled epoch, as task ids.
        self._ranked = {d: [ts[i].id for i in self._permutation(d, 0)] for d, ts in self.domains.items()}
        self._exhausted: set[str] = set()

    def _initial_state(self, weights: Mapping[str, float]) -> MixtureState:
        total = sum(weights.values())
        if any(not w > 0 for w in weights.values()):
            raise ValueError("mixture weights must be positive")
        offsets = random.Random(f"mixture:{self.seed}")
        return MixtureState(
            weights={d: weights[d] / total for d in self.domains},
            credits={d: offsets.random() for d in self.domains},
            epochs=dict.fromkeys(self.domains, 0),
            positions=dict.fromkeys(self.domains, 0),
            drawn=dict.fromkeys(self.domains, 0),
            trained=dict.fromkeys(self.domains, 0),
        )

    def _permutation(self, domain: str, epoch: int) -> list[int]:
        order = list(range(len(self.domains[domain])))
        random.Random(f"{self.seed}:{domain}:{epoch}").shuffle(order)
        return order

    def next(self, count: int) -> list[Task]:
        """The next ``count`` tasks; each is counted as drawn for its domain."""
        out = []
        while len(out) < count:
            domain = self._pick_domain()
            task = self._pick_task(domain)
            if task is None:
                self._exhausted.add(domain)
                continue
            self.state.drawn[domain] += 1
            out.append(task)
        return out

    def _pick_domain(self) -> str:
        s = self.state
        active = [d for d in self.domains if d not in self._exhausted and s.weights[d] > 0]
        if not active:
            raise UserError(
                "the curriculum has retired every task of every domain; add tasks, or raise "
                "schedule.curriculum_retire_after (0 never retires)"
            )
        total = sum(s.weights[d] for d in active)
        for domain in active:
            s.credits[domain] += s.weights[domain] / total
        chosen = max(active, key=lambda d: s.credits[d])  # ties: the first domain by name
        s.credits[chosen] -= 1.0
        return chosen

    def _pick_task(self, domain: str) -> Task | None:
        if self.curriculum is not None:
            task_id = self.curriculum.pick(self._ranked[domain])
            return None if task_id is None else self._by_id[task_id]
        s, tasks = self.state, self.domains[domain]
        if s.positions[domain] >= len(tasks):
            s.epochs[domain] += 1
            s.positions[domain] = 0
        epoch = s.epochs[domain]
        if self._orders.get(domain, (None,))[0] != epoch:
            self._orders[domain] = (epoch, self._permutation(domain, epoch))
        task = tasks[self._orders[domain][1][s.positions[domain]]]
        s.positions[domain] += 1
        return task

    def record_trained(self, domains: Iterable[str]) -> None:
        """Count one trained prompt (a kept group) for each domain listed."""
        for domain in domains:
            self.state.trained[domain] = self.state.trained.get(domain, 0) + 1

    def reweight(self, domain: str, factor: float) -> None:
        """Multiply one domain's share by ``factor`` and renormalise the shares."""
        weights = self.state.weights
        if domain not in weights:
            return
        weights[domain] *= factor
        total = sum(weights.values())
        for name in weights:
            weights[name] /= total

    def shares(self) -> dict[str, float]:
        """Each domain's share of all prompts drawn so far."""
        total = sum(self.state.drawn.values())
        return {d: (n / total if total else 0.0) for d, n in self.state.drawn.items()}
