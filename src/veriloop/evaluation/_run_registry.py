"""The run registry: one SQLite file that records every finished eval run.

Each row keeps the run's directory, model, task-set hash, seed, pass@1 and the whole
summary, so trend lines across checkpoints (and across time) build themselves. By default
the file is ``evals.sqlite`` in the parent of the eval's output directory, so sibling runs
share one registry. A run written again into the same directory replaces its row.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from veriloop.core import UserError

REGISTRY_FILE = "evals.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id INTEGER PRIMARY KEY AUTOINCREMENT,
    out_dir TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL,
    model TEXT NOT NULL,
    task_set_hash TEXT NOT NULL,
    seed INTEGER,
    samples_per_task INTEGER,
    pass_at_1 REAL NOT NULL,
    summary TEXT NOT NULL
)
"""


@dataclass(frozen=True)
class RegisteredRun:
    """One row of the registry."""

    run_id: int
    out_dir: str
    created_at: str
    model: str
    task_set_hash: str
    pass_at_1: float
    summary: dict[str, Any]

    @property
    def label(self) -> str:
        return Path(self.out_dir).name or self.out_dir


def default_registry_path(out: str | os.PathLike[str]) -> Path:
    """``evals.sqlite`` beside the eval directory ``out``."""
    return Path(out).resolve().parent / REGISTRY_FILE


class RunRegistry:
    """Record and list eval runs in one SQLite file (created on first use)."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        if self.path.is_dir():
            raise UserError(
                f"{self.path}: is a directory; the run registry is a file (e.g. {self.path / REGISTRY_FILE})"
            )

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            connection = sqlite3.connect(self.path, timeout=30)
            connection.execute(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise UserError(f"{self.path}: not a usable run registry ({exc})") from None
        return connection

    def record(self, out_dir: str | os.PathLike[str], summary: dict[str, Any]) -> int:
        """Insert (or replace) the run written in ``out_dir``; returns its run id."""
        row = (
            str(Path(out_dir).resolve()),
            summary["created_at"],
            summary["model"],
            summary["task_set_hash"],
            summary.get("seed"),
            summary.get("samples_per_task"),
            summary["pass@1"],
            json.dumps(summary),
        )
        with contextlib.closing(self._connect()) as connection, connection:
            connection.execute("DELETE FROM runs WHERE out_dir = ?", row[:1])
            cursor = connection.execute(
                "INSERT INTO runs (out_dir, created_at, model, task_set_hash, seed, samples_per_task, pass_at_1, summary)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                row,
            )
            return int(cursor.lastrowid)

    def runs(self, task_set_hash: str | None = None, model: str | None = None) -> list[RegisteredRun]:
        """Registered runs, oldest first, optionally of one task set and/or one model."""
        if not self.path.exists():
            return []
        query, arguments = (
            "SELECT run_id, out_dir, created_at, model, task_set_hash, pass_at_1, summary FROM runs WHERE 1=1",
            [],
        )
        if task_set_hash is not None:
            query += " AND task_set_hash = ?"
            arguments.append(task_set_hash)
        if model is not None:
            query += " AND model = ?"
            arguments.append(model)
        with contextlib.closing(self._connect()) as connection:
            rows = connection.execute(query + " ORDER BY created_at, run_id", arguments).fetchall()
        return [RegisteredRun(r[0], r[1], r[2], r[3], r[4], r[5], json.loads(r[6])) for r in rows]
