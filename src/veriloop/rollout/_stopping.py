"""Early stopping: budgets and detectors that end derailed trajectories before they waste compute."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


def repeating_block(tokens: Sequence[int], min_repeats: int, max_period: int = 32) -> int | None:
    """The period of a block that the tail of ``tokens`` repeats ``min_repeats`` times, or None.

    A period-1 block needs twice as many repeats, so that a long number such as 1000000 is not
    taken for a loop.
    """
    if min_repeats < 2:
        return None
    n = len(tokens)
    for period in range(1, max_period + 1):
        repeats = min_repeats * 2 if period == 1 else min_repeats
        span = period * repeats
        if span > n:
            break
        tail = tokens[n - span :]
        block = tail[-period:]
        if all(tail[i] == block[i % period] for i in range(span)):
            return period
    return None


class StopConfig(BaseModel):
    """Per-trajectory budgets and detectors."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_turns: int = Field(default=1, ge=1, description="model turns per episode")
    max_total_tokens: int = Field(default=2048, ge=1, description="generated plus observation tokens")
    repetition_repeats: int = Field(
        default=4, ge=0, description="stop when the tail repeats a block this many times (0: off)"
    )
    max_repeated_failures: int = Field(
        default=2, ge=0, description="stop when the same failing action is repeated this often (0: off)"
    )


StopPredicate = Callable[[dict[str, Any]], str | None]
"""Called after each turn with the episode's state (``turns``, ``tokens``, ``last_action``,
``last_status``); returns a reason string to stop the trajectory, or None to go on."""


class FailureTracker:
    """Counts how often the same failing action was repeated in one episode."""

    def __init__(self, limit: int):
        self.limit = limit
        self._last: str | None = None
        self._count = 0

    def record(self, action: str, failed: bool) -> bool:
        """Record one action; True when the limit of identical failing repeats is reached."""
        if not failed:
            self._last, self._count = None, 0
            return False
        key = " ".join(action.split())
        self._count = self._count + 1 if key == self._last else 1
        self._last = key
        return self.limit > 0 and self._count > self.limit
