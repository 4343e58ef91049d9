"""Heartbeats: every phase of a run says what it is doing; a phase that goes quiet is reported.

Phases (``rollout``, ``train``, ``evaluate``, ``checkpoint``, ...) call ``beat(phase, doing)``
as they make progress and ``idle(phase)`` when they finish. A watchdog thread reports any busy
phase whose last beat is older than ``stall_after_s``, once per stall, with the text of its last
beat: the run says "rollout has made no progress for 312 s: step 7, 40/128 episodes done"
instead of hanging silently. Reports go to ``OUT/events.jsonl`` and to ``on_stall``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Iterator

EVENTS_FILE = "events.jsonl"


@dataclass(frozen=True)
class Stall:
    phase: str
    doing: str
    quiet_s: float


class Heartbeats:
    """Tracks the last beat of each busy phase; a daemon thread reports stalls."""

    def __init__(self, stall_after_s: float, out: Path | None = None, on_stall: Callable[[Stall], None] | None = None):
        self.stall_after_s = stall_after_s
        self.events = Path(out) / EVENTS_FILE if out is not None else None
        self.on_stall = on_stall
        self._busy: dict[str, tuple[str, float]] = {}  # phase -> (doing, monotonic time of last beat)
        self._reported: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="veriloop-heartbeats", daemon=True)
        self._thread.start()

    def beat(self, phase: str, doing: str) -> None:
        with self._lock:
            self._busy[phase] = (doing, time.monotonic())
            self._reported.discard(phase)

    def idle(self, phase: str) -> None:
        with self._lock:
            self._busy.pop(phase, None)
            self._reported.discard(phase)

    @contextmanager
    def phase(self, name: str, doing: str) -> Iterator[None]:
        self.beat(name, doing)
        try:
            yield
        finally:
            self.idle(name)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()

    def check(self) -> list[Stall]:
        """Stalls not reported yet (the watchdog calls this; tests may too)."""
        now = time.monotonic()
        stalls = []
        with self._lock:
            for phase, (doing, last) in self._busy.items():
                if phase not in self._reported and now - last >= self.stall_after_s:
                    self._reported.add(phase)
                    stalls.append(Stall(phase, doing, round(now - last, 1)))
        for stall in stalls:
            self._report(stall)
        return stalls

    def _watch(self) -> None:
        while not self._stop.wait(min(max(self.stall_after_s / 4, 0.01), 5.0)):
            self.check()

    def _report(self, stall: Stall) -> None:
        if self.events is not None:
            self.events.parent.mkdir(parents=True, exist_ok=True)
            with self.events.open("a", encoding="utf-8") as handle:
                handle.write(
                    json.dumps(
                        {
                            "time": time.time(),
                            "event": "stall",
                            "phase": stall.phase,
                            "doing": stall.doing,
                            "quiet_s": stall.quiet_s,
                        }
                    )
                    + "\n"
                )
        if self.on_stall is not None:
            self.on_stall(stall)


def read_events(out: str | Path) -> list[dict]:
    path = Path(out) / EVENTS_FILE
    return (
        [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        if path.exists()
        else []
    )
