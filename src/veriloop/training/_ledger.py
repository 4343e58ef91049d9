"""Exactly-once accounting of prompts: ``OUT/prompts.jsonl``.

Every prompt the sampler draws gets one line when the step that drew it is trained:
``{"draw": N, "task_id": ..., "step": K, "outcome": "trained" | "dropped", "reason": ...}``.
Draw indices count from 0 over the whole run. A checkpoint records how many draws it covers;
resuming from it cuts the ledger back to those draws (the later ones were trained into weights
that the kill threw away, and the sampler, restored to the same cursor, draws them again).
So at any time the ledger holds each draw index exactly once, in order, with no gap.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from veriloop.core import atomic_write
from veriloop.training._pipeline import Draw

LEDGER_FILE = "prompts.jsonl"


class PromptLedger:
    """Append-only record of every draw; ``truncate(n)`` keeps draws ``0 .. n-1``."""

    def __init__(self, out: Path):
        self.path = Path(out) / LEDGER_FILE
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def record(self, step: int, draws: Sequence[Draw]) -> None:
        lines = "".join(
            json.dumps(
                {
                    "draw": d.index,
                    "task_id": d.task_id,
                    "step": step,
                    "outcome": d.outcome,
                    **({"reason": d.reason} if d.reason else {}),
                }
            )
            + "\n"
            for d in draws
        )
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(lines)
            handle.flush()
            os.fsync(handle.fileno())

    def truncate(self, draws: int) -> None:
        """Keep the lines of draws below ``draws`` (a torn last line is dropped too)."""
        if not self.path.exists():
            return
        kept = [
            line + "\n"
            for line in self.path.read_text(encoding="utf-8").splitlines()
            if (index := _draw_index(line)) is not None and index < draws
        ]
        with atomic_write(self.path) as handle:
            handle.write("".join(kept))


def _draw_index(line: str) -> int | None:
    try:
        return int(json.loads(line)["draw"])
    except (ValueError, KeyError, TypeError):
        return None


def read_ledger(out: str | Path) -> list[dict[str, Any]]:
    """The ledger's records, in order."""
    path = Path(out) / LEDGER_FILE
    return (
        [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        if path.exists()
        else []
    )


def ledger_summary(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Counts by outcome and reason, and whether draw indices run 0..N-1 exactly once."""
    indices = [r["draw"] for r in records]
    return {
        "draws": len(records),
        "trained": sum(r["outcome"] == "trained" for r in records),
        "dropped": dict(Counter(r.get("reason", "") for r in records if r["outcome"] == "dropped")),
        "exactly_once": indices == list(range(len(indices))),
    }
