"""Review judgments in the run registry, and the agreement figures computed from them."""

from __future__ import annotations

import os
from importlib.metadata import version
import signal
import sqlite3
import subprocess
import sys

import pytest

from veriloop.core import UserError
from veriloop.evaluation import (
    Judgment,
    JudgmentStore,
    RunRegistry,
    agreement,
    false_pass_failures,
    verifier_version,
    wilson_interval,
)


def judgment(
    sample: str, verdict: str, passed: bool, *, domain: str = "math", kind: str = "exact", reviewer: str = "ana"
):
    return Judgment(
        run="/runs/a",
        sample_id=sample,
        task_id=sample.partition("#")[0],
        domain=domain,
        verifier_kind=kind,
        verifier_version="0.1.0+abc",
        verifier_passed=passed,
        verdict=verdict,
        note=f"note on {sample}",
        reviewer=reviewer,
        response=f"answer {sample}",
    )


def test_saved_judgments_read_back_and_share_the_run_registry(tmp_path):
    path = tmp_path / "evals.sqlite"
    RunRegistry(path).record(tmp_path / "run", {"created_at": "t", "model": "m", "task_set_hash": "h", "pass@1": 0.5})
    store = JudgmentStore(path)
    saved = store.save(judgment("t1#0", "should_fail", True))
    assert saved.judgment_id == 1 and saved.created_at.endswith("+00:00")
    again = JudgmentStore(path).all()
    assert again == [saved] and again[0].verifier_passed is True and again[0].response == "answer t1#0"
    assert len(RunRegistry(path).runs()) == 1  # both tables live in one file
    assert JudgmentStore(path).all(["/runs/other"]) == []


def test_the_latest_call_of_each_reviewer_counts(tmp_path):
    store = JudgmentStore(tmp_path / "evals.sqlite")
    store.save(judgment("t1#0", "right", True))
    store.save(judgment("t1#0", "should_fail", True))  # ana changed her mind
    store.save(judgment("t1#0", "right", True, reviewer="ben"))
    latest = store.latest()
    assert sorted((j.reviewer, j.verdict) for j in latest) == [("ana", "should_fail"), ("ben", "right")]
    assert len(store.all()) == 3  # nothing is overwritten


def test_agreement_rates_and_wilson_intervals_by_hand(tmp_path):
    judgments = [
        judgment("m1#0", "right", True),
        judgment("m2#0", "should_fail", True),
        judgment("m3#0", "right", True),
        judgment("m4#0", "right", True),
        judgment("m5#0", "should_pass", False),
        judgment("m6#0", "right", False),
        judgment("m7#0", "unsure", True),
        judgment("c1#0", "should_fail", True, domain="code", kind="python_tests"),
        judgment("c2#0", "should_fail", True, domain="code", kind="python_tests"),
    ]
    report = agreement(judgments)
    math = report.domains["math"]
    assert (math.judgments, math.unsure) == (7, 1)
    assert (math.agreement.count, math.agreement.of, math.agreement.value) == (4, 6, round(4 / 6, 6))
    assert (math.false_pass.count, math.false_pass.of) == (1, 4) and math.false_pass.value == 0.25
    assert (math.false_fail.count, math.false_fail.of) == (1, 2) and math.false_fail.value == 0.5
    low, high = wilson_interval(1, 4)
    assert math.false_pass.ci == (round(low, 6), round(high, 6))
    assert 0.04 < low < 0.05 and 0.69 < high < 0.70  # Wilson 95% for 1 of 4
    assert report.verifier_kinds["python_tests"].false_pass.value == 1.0
    assert report.total.agreement.of == 8 and report.reviewers == ("ana",)
    empty = agreement([]).total
    assert empty.agreement.value is None and empty.agreement.ci == (0.0, 1.0)


def test_the_false_pass_gate_needs_enough_judgments(tmp_path):
    judgments = [judgment(f"c{i}#0", "should_fail" if i < 2 else "right", True, domain="code") for i in range(5)]
    judgments += [judgment("m1#0", "should_fail", True)]
    report = agreement(judgments)
    failures = false_pass_failures(report, max_rate=0.3, min_judgments=5)
    assert len(failures) == 1 and failures[0].startswith("code: false-pass rate 0.400 (2 of 5")
    assert false_pass_failures(report, max_rate=0.3, min_judgments=6) == []  # math has 1, code 5
    loose = false_pass_failures(report, max_rate=0.4, min_judgments=1)
    assert len(loose) == 1 and loose[0].startswith("math: false-pass rate 1.000 (1 of 1 passed samples")


def _writer(path, reviewer: str, count: int) -> subprocess.Popen[str]:
    """A separate process (a second browser's server, say) saving ``count`` judgments, printing
    the number of each as soon as its save returned."""
    code = (
        "from veriloop.evaluation import Judgment, JudgmentStore\n"
        f"store = JudgmentStore({str(path)!r})\n"
        f"for n in range({count}):\n"
        "    store.save(Judgment(run='/r', sample_id=f's{n}', task_id='t', domain='d', verifier_kind='exact',\n"
        f"        verifier_version='v', verifier_passed=True, verdict='right', reviewer={reviewer!r}))\n"
        "    print(n, flush=True)\n"
    )
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)


def test_concurrent_reviewers_lose_nothing(tmp_path):
    path = tmp_path / "evals.sqlite"
    writers = [_writer(path, f"r{n}", 40) for n in range(4)]
    for writer in writers:
        writer.communicate(timeout=120)
        assert writer.returncode == 0
    saved = JudgmentStore(path).all()
    assert len(saved) == 160 and len({j.judgment_id for j in saved}) == 160
    assert {j.reviewer for j in saved} == {"r0", "r1", "r2", "r3"}


def test_a_killed_writer_loses_nothing_it_saved(tmp_path):
    path = tmp_path / "evals.sqlite"
    writer = _writer(path, "k", 100000)
    acknowledged = -1
    for line in writer.stdout:
        acknowledged = int(line)
        if acknowledged >= 30:
            break
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait()
    saved = {j.sample_id for j in JudgmentStore(path).all()}
    assert {f"s{n}" for n in range(acknowledged + 1)} <= saved  # every save that returned is there
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_a_bad_registry_is_a_user_error(tmp_path):
    (tmp_path / "junk.sqlite").write_text("not a database at all" * 100)
    with pytest.raises(UserError, match="not a usable run registry"):
        JudgmentStore(tmp_path / "junk.sqlite").save(judgment("t#0", "right", True))
    with pytest.raises(UserError, match="is a directory"):
        JudgmentStore(tmp_path)


def test_the_verifier_version_names_release_and_config():
    a = verifier_version({"kind": "exact", "strip": True})
    assert a == verifier_version({"strip": True, "kind": "exact"}) != verifier_version({"kind": "exact"})
    assert a.startswith(version("veriloop") + "+") and verifier_version(None) == version("veriloop") + "+unknown"
