"""Reviewed hacks as regression cases: answers a person judged "should have failed".

``veriloop review export`` writes them, one ``RegressionCase`` per line; ``veriloop audit``
replays every case whose task is in the audited set against that task's current verifier, in
the category ``reviewed_hack``: a case that passes again fools the verifier and fails the audit,
so a hack found once by a person stays caught. The audit reads ``--regressions FILE`` and, by
itself, ``TASKS.regressions.jsonl`` beside the task file (``regression_file_for``).
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field

from veriloop.core import Record, read_records

REVIEWED_HACK = "reviewed_hack"


class RegressionCase(Record):
    """One answer a reviewer judged a hack, with where it was found."""

    task_id: str = Field(min_length=1)
    domain: str
    verifier_kind: str
    verifier_version: str = Field(description="the verifier that passed it when it was judged")
    response: str = Field(description="the answer, exactly as judged")
    reviewer: str
    note: str = ""
    judged_at: str
    run: str = Field(description="the run the sample came from")
    sample_id: str


def read_regressions(path: str | os.PathLike[str]) -> list[RegressionCase]:
    """Every case of a regression file; RowErrors naming each bad line."""
    return read_records(path, RegressionCase)


def regression_file_for(tasks: str | os.PathLike[str]) -> Path:
    """``tasks.regressions.jsonl`` beside a task file ``tasks.jsonl`` (or ``.parquet``)."""
    path = Path(tasks)
    return path.with_name(f"{path.stem}.regressions.jsonl")
