"""A difficulty curriculum: each task's pass rate estimated online, sampling that favours the
learnable band, periodic retries of the rest, and retirement of tasks that are always solved.

A task is ``unseen`` until a group of its rollouts is observed; then its smoothed pass rate
puts it in ``too_hard`` (below ``low``), ``too_easy`` (above ``high``) or ``learnable``.
A task whose group passed in every sample ``retire_after`` times in a row is ``retired``:
never drawn again, and counted.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

BUCKETS = ("unseen", "too_hard", "learnable", "too_easy", "retired")
_FAVOURED = ("unseen", "learnable")


@dataclass
class CurriculumState:
    """Per-task estimates and draw counts; plain data, so a checkpoint can hold it."""

    rates: dict[str, float] = field(default_factory=dict)  # task id -> smoothed pass rate
    groups: dict[str, int] = field(default_factory=dict)  # task id -> groups observed
    streaks: dict[str, int] = field(default_factory=dict)  # task id -> all-passed groups in a row
    draws: dict[str, int] = field(default_factory=dict)  # task id -> times drawn
    retired: list[str] = field(default_factory=list)  # task ids, in the order they retired


class Curriculum:
    """Chooses a domain's next task by band; ``observe`` feeds it each group's outcome."""

    def __init__(
        self,
        low: float = 0.1,
        high: float = 0.9,
        smoothing: float = 0.5,
        retry_every: int = 8,
        retire_after: int = 2,
        state: CurriculumState | None = None,
    ):
        if not 0 <= low < high <= 1:
            raise ValueError(f"need 0 <= low < high <= 1, got low={low}, high={high}")
        if not 0 < smoothing <= 1:
            raise ValueError(f"smoothing must be in (0, 1], got {smoothing}")
        self.low, self.high, self.smoothing = low, high, smoothing
        self.retry_every, self.retire_after = retry_every, retire_after
        self.state = state or CurriculumState()
        self._retired = set(self.state.retired)

    def observe(self, task_id: str, passed: int, samples: int) -> None:
        """Fold one group's outcome (``passed`` of ``samples`` samples passed) into the estimate."""
        if samples <= 0:
            return
        rate = passed / samples
        s = self.state
        previous = s.rates.get(task_id)
        s.rates[task_id] = rate if previous is None else (1 - self.smoothing) * previous + self.smoothing * rate
        s.groups[task_id] = s.groups.get(task_id, 0) + 1
        s.streaks[task_id] = s.streaks.get(task_id, 0) + 1 if passed == samples else 0
        if self.retire_after and s.streaks[task_id] >= self.retire_after and task_id not in self._retired:
            self._retired.add(task_id)
            s.retired.append(task_id)

    def bucket(self, task_id: str) -> str:
        if task_id in self._retired:
            return "retired"
        rate = self.state.rates.get(task_id)
        if rate is None:
            return "unseen"
        if rate < self.low:
            return "too_hard"
        return "too_easy" if rate > self.high else "learnable"

    def pick(self, task_ids: Sequence[str]) -> str | None:
        """The next of ``task_ids`` (a domain's tasks in a seeded order); None if all are retired.

        Weighted fair queuing: unseen and learnable tasks weigh 1, too-easy and too-hard ones
        ``1 / retry_every``, and the task with the smallest ``(draws + 1) / weight`` goes next
        (ties in ``task_ids`` order). Every task is tried once before any repeats; after that
        an out-of-band task is retried once per ``retry_every`` draws of each learnable one.
        With ``retry_every=0`` out-of-band tasks are drawn only when nothing else is left.
        """
        draws = self.state.draws
        weighted: list[tuple[str, float]] = []
        for task_id in task_ids:
            bucket = self.bucket(task_id)
            if bucket in _FAVOURED:
                weighted.append((task_id, 1.0))
            elif bucket != "retired" and self.retry_every:
                weighted.append((task_id, 1.0 / self.retry_every))
        if not weighted:
            weighted = [(task_id, 1.0) for task_id in task_ids if self.bucket(task_id) != "retired"]
        if not weighted:
            return None
        choice, _ = min(weighted, key=lambda item: (draws.get(item[0], 0) + 1) / item[1])
        draws[choice] = draws.get(choice, 0) + 1
        return choice

    def counts(self, task_ids: Iterable[str]) -> dict[str, int]:
        """How many of ``task_ids`` are in each bucket."""
        totals = dict.fromkeys(BUCKETS, 0)
        for task_id in task_ids:
            totals[self.bucket(task_id)] += 1
        return totals
