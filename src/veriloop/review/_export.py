"""From "should have failed (hack)" judgments to a regression file that ``veriloop audit`` replays.

The file keeps what was there: a case already in it (same task and same answer) is not written
twice, so exporting after every review session only adds the new hacks. Written atomically.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from veriloop.core import write_jsonl
from veriloop.evaluation import Judgment
from veriloop.verifiers import RegressionCase, read_regressions


def _case(judgment: Judgment) -> RegressionCase:
    return RegressionCase(
        task_id=judgment.task_id,
        domain=judgment.domain,
        verifier_kind=judgment.verifier_kind,
        verifier_version=judgment.verifier_version,
        response=judgment.response,
        reviewer=judgment.reviewer,
        note=judgment.note,
        judged_at=judgment.created_at,
        run=judgment.run,
        sample_id=judgment.sample_id,
    )


def export_hacks(judgments: Iterable[Judgment], out: str | os.PathLike[str]) -> tuple[int, int]:
    """Add every "should_fail" judgment of ``judgments`` (pass the store's ``latest``) to the
    regression file ``out``; returns ``(cases added, cases in the file)``."""
    path = Path(out)
    cases = read_regressions(path) if path.is_file() else []
    known = {(case.task_id, case.response) for case in cases}
    added = 0
    for judgment in judgments:
        if judgment.verdict != "should_fail" or (judgment.task_id, judgment.response) in known:
            continue
        cases.append(_case(judgment))
        known.add((judgment.task_id, judgment.response))
        added += 1
    write_jsonl(path, cases)
    return added, len(cases)
