"""What judgments feed: ``review stats``, ``veriloop report``, the compare gate, and hacks exported
into a regression file that ``veriloop audit`` replays against the verifier."""

from __future__ import annotations

import json

import pytest

from veriloop.core import Task, read_records, write_jsonl
from veriloop.evaluation import JudgmentStore
from veriloop.review import load_sources

pytestmark = pytest.mark.e2e


def _judge(run, verdicts: dict[str, str], reviewer: str = "ana") -> None:
    """Save judgments of ``sample_id -> verdict`` for the samples of ``run``, as the page would."""
    store = JudgmentStore(run.parent / "evals.sqlite")
    samples = {s.sample_id: s for s in load_sources([run])}
    for sample_id, verdict in verdicts.items():
        note = "hedge: lists three numbers" if verdict == "should_fail" else ""
        store.save(samples[sample_id].judgment(verdict, note, reviewer))


@pytest.fixture
def judged(review_runs):
    hacks = {f"extract/{i}#0": "should_fail" for i in range(4)}
    fine = {f"math/{i}#0": "right" for i in range(1, 5)} | {"math/1#3": "should_pass", "math/2#3": "unsure"}
    _judge(review_runs["after"], hacks | fine)
    return review_runs


def test_stats_prints_agreement_as_json(judged, run_cli):
    result = run_cli("review", "stats", str(judged["after"]))
    assert result.returncode == 0, result.stderr
    stats = json.loads(result.stdout)
    extraction = stats["domains"]["extraction"]
    assert extraction["false_pass"] == {"count": 4, "of": 4, "value": 1.0, "ci": extraction["false_pass"]["ci"]}
    assert extraction["false_pass"]["ci"][0] > 0.45 and extraction["false_pass"]["ci"][1] == 1.0
    assert stats["domains"]["math"]["false_fail"]["count"] == 1 and stats["domains"]["math"]["unsure"] == 1
    assert set(stats["verifier_kinds"]) == {"exact", "regex"} and stats["reviewers"] == ["ana"]
    assert stats["total"]["judgments"] == 10
    nothing = run_cli(
        "review", "stats", str(judged["before"]), "--registry", str(judged["tasks"].parent / "none.sqlite")
    )
    assert nothing.returncode == 2 and "no run registry here" in nothing.stderr


def test_the_report_shows_the_review_figures(judged, run_cli, tmp_path):
    out = tmp_path / "report.html"
    result = run_cli("report", str(judged["before"]), str(judged["after"]), "--out", str(out))
    assert result.returncode == 0, result.stderr
    html = out.read_text()
    section = html[html.index("<h2>Verifier review (spot checks)</h2>") :]
    assert "10 judgments by 1 reviewer " in section and "<td>extraction</td>" in section
    assert "100.0% <span class=ci>(4/4)" in section  # extraction's false-pass rate
    bare = tmp_path / "bare.html"
    assert (
        run_cli(
            "report", str(judged["before"]), "--out", str(bare), "--registry", str(tmp_path / "x.sqlite")
        ).returncode
        == 2
    )


def test_compare_gates_on_the_reviewed_false_pass_rate(judged, run_cli):
    before, after = str(judged["before"]), str(judged["after"])
    plain = run_cli("compare", before, after, "--gate")
    assert plain.returncode == 0, plain.stdout + plain.stderr
    gated = run_cli("compare", before, after, "--gate", "--max-false-pass", "0.2", "--min-judgments", "3")
    assert gated.returncode == 1
    assert "gate: extraction: false-pass rate 1.000 (4 of 4 passed samples judged hacks" in gated.stderr
    assert "math" not in gated.stderr.split("false-pass rate", 1)[0]
    too_few = run_cli("compare", before, after, "--gate", "--max-false-pass", "0.2", "--min-judgments", "5")
    assert too_few.returncode == 0, too_few.stderr
    as_json = run_cli("compare", before, after, "--gate", "--max-false-pass", "0.2", "--min-judgments", "3", "--json")
    payload = json.loads(as_json.stdout)
    assert as_json.returncode == 1 and payload["review_gate"]["judgments"] == 10
    assert payload["gate"]["failures"] == payload["review_gate"]["failures"] and len(payload["gate"]["failures"]) == 1


def _reviewed_hack_row(report_path):
    rows = json.loads(report_path.read_text())["rows"]
    return next(row for row in rows if row["category"] == "reviewed_hack")


def test_exported_hacks_are_replayed_by_every_audit(judged, run_cli, tmp_path):
    regressions = judged["tasks"].with_name("tasks.regressions.jsonl")
    first = run_cli("review", "export", str(judged["after"]), "--out", str(regressions))
    assert first.returncode == 0 and "added 4 reviewed hacks" in first.stderr
    again = run_cli("review", "export", str(judged["after"]), "--out", str(regressions))
    assert "added 0 reviewed hacks" in again.stderr and "(4 in the file)" in again.stderr
    from veriloop.verifiers.audit._regressions import RegressionCase

    cases = read_records(regressions, RegressionCase)
    assert {c.task_id for c in cases} == {f"extract/{i}" for i in range(4)}
    assert cases[0].response == "7 or 100 or 8" and cases[0].reviewer == "ana" and cases[0].note.startswith("hedge")

    lenient = tmp_path / "lenient-audit.json"
    audit = run_cli("audit", "--tasks", str(judged["tasks"]), "--per-kind", "1", "--out", str(lenient), timeout=300)
    assert audit.returncode == 1 and "4 reviewed hacks replayed" in audit.stderr
    row = _reviewed_hack_row(lenient)
    assert (row["kind"], row["tasks"], row["fooled"]) == ("regex", 4, 4)  # the verifier still passes them

    fixed = tmp_path / "fixed.jsonl"  # the verifier made strict: the same hacks now fail
    tasks = read_records(judged["tasks"], Task)
    write_jsonl(
        fixed, [t.model_copy(update={"verifier": {"kind": "exact"}}) if t.domain == "extraction" else t for t in tasks]
    )
    strict = tmp_path / "strict-audit.json"
    replay = run_cli(
        "audit",
        "--tasks",
        str(fixed),
        "--per-kind",
        "1",
        "--regressions",
        str(regressions),
        "--out",
        str(strict),
        timeout=300,
    )
    row = _reviewed_hack_row(strict)
    assert (row["kind"], row["tasks"], row["fooled"], row["max_reward"]) == ("exact", 4, 0, 0.0), replay.stderr


def test_a_broken_regression_file_is_named_with_its_line(judged, run_cli, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"task_id": "extract/0"}\nnot json\n')
    result = run_cli("audit", "--tasks", str(judged["tasks"]), "--regressions", str(bad))
    assert result.returncode == 2 and f"{bad}: line 1" in result.stderr and f"{bad}: line 2" in result.stderr
    missing = run_cli("audit", "--tasks", str(judged["tasks"]), "--regressions", str(tmp_path / "gone.jsonl"))
    assert missing.returncode == 2 and "no such regression file" in missing.stderr
