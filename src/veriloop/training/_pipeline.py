"""The asynchronous pipeline: generation runs ahead of the trainer, by a bounded number of versions.

A producer thread builds the batch of step ``k`` (sampling rounds, refills and all) once the
trainer has finished step ``k - 1 - max_staleness``, with the newest weights published by then,
and puts it on a queue; the trainer takes batches in step order. A step makes at most one update,
so a trajectory trained on at step ``k`` was sampled by a policy at most ``max_staleness``
versions older than the trainer's, and ``max_staleness = 0`` is the synchronous algorithm exactly
(the producer waits for every step, as the sync loop does). Gating on steps rather than versions
keeps the producer going when a step makes no update (every group dropped).

Batches are built whole and in draw order, so slow (long) rollouts are never overtaken by fast
ones and never biased out of training.

With partial rollouts (``pipeline.partial_rollouts``) the producer does not hold new weights
back until its batch is done: the rollout engine asks ``take_pending`` between decode steps and
goes on with whatever the trainer published meanwhile, so long episodes finish under newer
weights, their tokens tagged with the version that sampled each. A batch is still sampled no
earlier than it is now, so no token is older than ``max_staleness`` versions behind the trainer.
"""

from __future__ import annotations

import dataclasses
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from veriloop.core import Trajectory


@dataclass(frozen=True)
class Draw:
    """One prompt drawn from the sampler, and what became of it."""

    index: int  # position in the run's sequence of draws (0, 1, 2, ...)
    task_id: str
    outcome: str  # "trained" or "dropped"
    reason: str = ""  # why a dropped group was dropped: "no_signal", "infra_error"


@dataclass(frozen=True)
class SampledBatch:
    """What the trainer consumes at one step: the kept groups and the bookkeeping of their making."""

    step: int  # the step that trains on it (1-based)
    groups: list[list[Trajectory]]
    sampling: dict[str, Any]  # metrics of the sampling rounds
    draws: list[Draw]  # every prompt drawn for this batch, kept or dropped, in draw order
    sampler_state: Any  # the sampler's cursor right after this batch was drawn (for checkpoints)
    policy_version: int  # the weights it was sampled with
    wait_s: float = 0.0  # how long the producer waited for weights or queue space before sampling it
    busy_s: float = 0.0  # how long sampling it took


class _Failed:
    """A producer error carried through the queue to the trainer thread."""

    def __init__(self, error: BaseException):
        self.error = error


class AsyncSampler:
    """Runs ``sample(step)`` on a producer thread, at most ``max_staleness`` steps ahead.

    ``step_done(step, version, state)`` tells the producer a step is trained and hands it the
    new weights (``state`` None: the step made no update); the producer loads them into the
    rollout backend (``apply(version, state)``) before it starts its next batch, never mid-batch.
    """

    def __init__(
        self,
        sample: Callable[[int], SampledBatch],
        apply: Callable[[int, Any], None],
        *,
        first_step: int,
        last_step: int,
        max_staleness: int,
    ):
        self._sample, self._apply = sample, apply
        self._next_step, self._last_step = first_step, last_step
        self.max_staleness = max_staleness
        self._trained = first_step - 1  # steps the trainer has finished
        self._pending: tuple[int, Any] | None = None  # weights published but not yet applied
        self._ready: queue.Queue[SampledBatch | _Failed] = queue.Queue(maxsize=max_staleness + 1)
        self._changed = threading.Condition()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="veriloop-producer", daemon=True)

    def start(self) -> AsyncSampler:
        self._thread.start()
        return self

    def step_done(self, step: int, version: int, state: Any) -> None:
        with self._changed:
            self._trained = step
            if state is not None:
                self._pending = (version, state)
            self._changed.notify_all()

    def take_pending(self) -> tuple[int, Any] | None:
        """The (version, weights) published since they were last taken, or None; the producer
        thread's rollout engine calls it between decode steps (partial rollouts)."""
        with self._changed:
            pending, self._pending = self._pending, None
            return pending

    def next(self) -> tuple[SampledBatch, float, int]:
        """The next batch, the seconds the trainer waited for it, and the queue depth it found."""
        depth = self._ready.qsize()
        started = time.monotonic()
        item = self._ready.get()
        if isinstance(item, _Failed):
            raise item.error
        return item, time.monotonic() - started, depth

    def close(self) -> None:
        with self._changed:
            self._stopping = True
            self._changed.notify_all()
        while self._thread.is_alive():
            try:  # unblock a producer waiting for queue space
                self._ready.get(timeout=0.05)
            except queue.Empty:
                pass
        self._thread.join()

    def _run(self) -> None:
        while self._next_step <= self._last_step:
            step = self._next_step
            waited = time.monotonic()
            with self._changed:
                # Batch k may be sampled once step k - 1 - max_staleness is trained.
                self._changed.wait_for(lambda: self._stopping or self._trained >= step - 1 - self.max_staleness)  # noqa: B023
                if self._stopping:
                    return
                pending, self._pending = self._pending, None
            try:
                if pending is not None:
                    self._apply(*pending)
                started = time.monotonic()
                batch = self._sample(step)
                item: SampledBatch | _Failed = dataclasses.replace(
                    batch, wait_s=started - waited, busy_s=time.monotonic() - started
                )
            except BaseException as error:  # noqa: BLE001  (re-raised on the trainer thread)
                item = _Failed(error)
            if not self._put(item) or isinstance(item, _Failed):
                return
            self._next_step += 1

    def _put(self, item: SampledBatch | _Failed) -> bool:
        while True:
            with self._changed:
                if self._stopping:
                    return False
            try:
                self._ready.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue


def staleness_metrics(trajectories: list[Trajectory], trainer_version: int) -> dict[str, float]:
    """Mean, max and histogram (``staleness/hist/<k>``: trajectories k versions old, by their
    oldest token) of a batch; per generated token, the mean age (``staleness/token_mean``) and
    the share of trajectories sampled by more than one version (``staleness/straddling``: a
    weight update landed while they generated)."""
    ages = [trainer_version - (t.policy_version or 0) for t in trajectories]
    metrics: dict[str, float] = {
        "staleness/mean": sum(ages) / max(len(ages), 1),
        "staleness/max": float(max(ages, default=0)),
    }
    for age in sorted(set(ages)):
        metrics[f"staleness/hist/{age}"] = float(ages.count(age))
    token_ages, straddling = [], 0
    for trajectory in trajectories:
        versions = {
            version
            for row in trajectory.contexts()
            for version, trained in zip(row.token_versions, row.loss_mask)
            if trained
        }
        straddling += len(versions) > 1
        token_ages += [
            trainer_version - version
            for row in trajectory.contexts()
            for version, trained in zip(row.token_versions, row.loss_mask)
            if trained
        ]
    if token_ages:
        metrics["staleness/token_mean"] = sum(token_ages) / len(token_ages)
    metrics["staleness/straddling"] = straddling / max(len(trajectories), 1)
    return metrics
