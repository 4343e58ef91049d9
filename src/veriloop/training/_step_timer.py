"""Where each training step's wall time goes: the ``time/...`` and ``util/...`` metrics of a step.

A step calls ``start()``, then runs its parts inside ``phase(name)``. The phase ``"wait"`` is
the time the trainer waited for its batch (sampling it, in synchronous mode); every other phase
``name`` is reported as ``time/<name>_s``. The trainer counts as busy from the end of the wait to
``metrics()``. Busy fractions are over the whole run so far (since the timer was made).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from veriloop.training._pipeline import SampledBatch


class StepTimer:
    """The clock of a trainer's steps (one instance per run, restarted by each step)."""

    def __init__(self) -> None:
        self._run_started = time.monotonic()
        self._trainer_busy_s = 0.0  # summed over the run's steps
        self._generator_busy_s = 0.0
        self.start()

    def start(self) -> None:
        """A new step begins: its phases start from zero."""
        self._started = time.perf_counter()
        self._phases: dict[str, float] = {}

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the enclosed part of the step as ``name`` (added up when a phase runs twice)."""
        started = time.perf_counter()
        try:
            yield
        finally:
            self._phases[name] = self._phases.get(name, 0.0) + time.perf_counter() - started

    def metrics(self, sampled: SampledBatch, queue_depth: int) -> dict[str, float]:
        """The step's timing metrics, ``sampled`` being its batch and ``queue_depth`` the batches
        that were ready when it asked; adds the step's busy time to the run's."""
        step_s = time.perf_counter() - self._started
        wait_s = self._phases.get("wait", 0.0)
        busy_s = step_s - wait_s
        self._trainer_busy_s += busy_s
        self._generator_busy_s += sampled.busy_s
        elapsed = max(time.monotonic() - self._run_started, 1e-9)
        return {
            **{f"time/{name}_s": seconds for name, seconds in self._phases.items() if name != "wait"},
            "util/trainer_busy_s": busy_s,
            "util/trainer_wait_s": wait_s,
            "util/generator_busy_s": sampled.busy_s,
            "util/generator_wait_s": sampled.wait_s,
            "util/inference_to_training": sampled.busy_s / max(busy_s, 1e-9),
            "util/trainer_busy_fraction": min(1.0, self._trainer_busy_s / elapsed),
            "util/generator_busy_fraction": min(1.0, self._generator_busy_s / elapsed),
            "util/queue_depth": queue_depth,
            "time/step_s": step_s,
        }
