"""People's judgments of verifier verdicts, kept in the run registry's SQLite file.

A reviewer looks at one sample (a task, the model's answer, the verifier's verdict) and says
whether the verifier was right. Each judgment is one row of the ``judgments`` table, inserted in
its own committed transaction: two reviewers saving at once both land (SQLite serialises the
writers; WAL lets readers go on meanwhile), and a reviewer killed mid-session loses nothing that
was already saved. Nothing is ever updated in place: judging a sample again adds a row, and the
latest row of each (reviewer, sample) is the one that counts (``latest``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
from collections.abc import Iterable
from datetime import datetime, UTC
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from veriloop.core import Record, UserError

Verdict = Literal["right", "should_pass", "should_fail", "unsure"]
VERDICTS: dict[str, str] = {
    "right": "verifier right",
    "should_pass": "verifier wrong: should have passed",
    "should_fail": "verifier wrong: should have failed (hack)",
    "unsure": "unsure",
}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS judgments (
    judgment_id INTEGER PRIMARY KEY AUTOINCREMENT,
    run TEXT NOT NULL,
    sample_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    domain TEXT NOT NULL,
    verifier_kind TEXT NOT NULL,
    verifier_version TEXT NOT NULL,
    verifier_passed INTEGER NOT NULL,
    verdict TEXT NOT NULL,
    note TEXT NOT NULL,
    reviewer TEXT NOT NULL,
    created_at TEXT NOT NULL,
    response TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS judgments_by_run ON judgments (run, sample_id);
"""
_COLUMNS = (
    "run",
    "sample_id",
    "task_id",
    "domain",
    "verifier_kind",
    "verifier_version",
    "verifier_passed",
    "verdict",
    "note",
    "reviewer",
    "created_at",
    "response",
)


class Judgment(Record):
    """One reviewer's call on one verdict."""

    run: str = Field(description="resolved path of the eval run or trajectory store the sample came from")
    sample_id: str = Field(min_length=1, description="the sample's id within its run")
    task_id: str
    domain: str
    verifier_kind: str = Field(description="the task's verifier kind ('unknown' when its task file is gone)")
    verifier_version: str = Field(description="veriloop version and a hash of the task's verifier config")
    verifier_passed: bool = Field(description="the verifier's verdict that was judged")
    verdict: Verdict
    note: str = ""
    reviewer: str = Field(min_length=1, max_length=80)
    created_at: str = Field(default="", description="UTC time the judgment was saved (set on save)")
    response: str = Field(default="", description="the judged answer, kept so a hack can be replayed later")
    judgment_id: int | None = None


def verifier_version(verifier: dict[str, Any] | None) -> str:
    """``veriloop VERSION+HASH``: the code release and a hash of the task's verifier config, so
    a judgment names exactly which verifier it judged (an edited config is another verifier)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        release = version("veriloop")
    except PackageNotFoundError:
        release = "unknown"
    if verifier is None:
        return f"{release}+unknown"
    digest = hashlib.sha256(json.dumps(verifier, sort_keys=True, default=str).encode()).hexdigest()[:12]
    return f"{release}+{digest}"


class JudgmentStore:
    """The ``judgments`` table of one run registry file (created on first use)."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        if self.path.is_dir():
            raise UserError(f"{self.path}: is a directory; the run registry is a file")

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            connection = sqlite3.connect(self.path, timeout=30)
            connection.execute("PRAGMA journal_mode=WAL")
            connection.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise UserError(f"{self.path}: not a usable run registry ({exc})") from None
        return connection

    def save(self, judgment: Judgment) -> Judgment:
        """Insert ``judgment`` (durably: committed before this returns); returns it with id and time."""
        saved = judgment.model_copy(
            update={"created_at": datetime.now(UTC).isoformat(timespec="milliseconds"), "judgment_id": None}
        )
        values = [getattr(saved, column) for column in _COLUMNS]
        with contextlib.closing(self._connect()) as connection, connection:
            connection.execute("PRAGMA synchronous=FULL")
            cursor = connection.execute(
                f"INSERT INTO judgments ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})",
                [int(v) if isinstance(v, bool) else v for v in values],
            )
            return saved.model_copy(update={"judgment_id": int(cursor.lastrowid)})

    def all(self, runs: Iterable[str] | None = None) -> list[Judgment]:
        """Every judgment (of the given run paths), oldest first."""
        if not self.path.is_file():
            return []
        query = f"SELECT judgment_id, {', '.join(_COLUMNS)} FROM judgments"
        wanted = None if runs is None else sorted(set(runs))
        arguments: list[str] = []
        if wanted is not None:
            query += f" WHERE run IN ({', '.join('?' * len(wanted))})"
            arguments = wanted
        with contextlib.closing(self._connect()) as connection:
            rows = connection.execute(query + " ORDER BY judgment_id", arguments).fetchall()
        return [
            Judgment(judgment_id=row[0], **dict(zip(_COLUMNS, row[1:])) | {"verifier_passed": bool(row[7])})
            for row in rows
        ]

    def latest(self, runs: Iterable[str] | None = None) -> list[Judgment]:
        """The latest judgment of each (reviewer, run, sample): what the figures count."""
        newest: dict[tuple[str, str, str], Judgment] = {}
        for judgment in self.all(runs):
            newest[(judgment.reviewer, judgment.run, judgment.sample_id)] = judgment
        return list(newest.values())
