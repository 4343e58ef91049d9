import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from veriloop.core import Response, Task
from veriloop.verifiers import verify


def _score(verifier, response, gold=None):
    task = Task(id="t", domain="d", prompt="p", verifier=verifier, gold=gold)
    return verify(task, Response(id="r", task_id="t", response=response))


def test_exact_normalises_whitespace_and_case_when_asked():
    assert _score({"kind": "exact"}, "  Paris \n", gold="Paris").passed
    assert not _score({"kind": "exact"}, "paris", gold="Paris").passed
    assert _score({"kind": "exact", "case_sensitive": False}, "paris", gold="Paris").reward == 1.0


def test_exact_last_line_mode_ignores_working():
    verifier = {"kind": "exact", "extract": "last_line"}
    assert _score(verifier, "2 + 2 is\n4\n", gold="4").passed
    assert not _score(verifier, "4\nor maybe 5", gold="4").passed


def test_exact_strips_a_required_prefix_once():
    verifier = {"kind": "exact", "strip_prefix": ">> "}
    assert _score(verifier, " >> 42\n", gold="42").passed and _score(verifier, "42", gold="42").passed
    assert not _score(verifier, ">> >> 42", gold="42").passed
    assert not _score(verifier, ">> 41\n>> 42", gold="42").passed


def test_exact_wrong_answer_has_feedback():
    score = _score({"kind": "exact"}, "Lyon", gold="Paris")
    assert score.reward == 0.0 and score.status == "scored"
    assert "Lyon" in score.feedback


def test_exact_without_expected_answer_is_an_infra_error():
    score = _score({"kind": "exact"}, "x")
    assert score.status == "infra_error" and score.reward is None
    assert "needs 'answer'" in score.detail


def test_regex_fullmatch_and_search():
    date = {"kind": "regex", "pattern": r"\d{4}-\d{2}-\d{2}"}
    assert _score(date, "2026-11-30").passed
    assert not _score(date, "it is 2026-11-30").passed
    assert _score(date | {"mode": "search"}, "it is 2026-11-30").passed


def test_catastrophic_backtracking_fails_the_answer_within_the_time_limit():
    nested = {"kind": "regex", "pattern": r"(a+)+$", "mode": "search", "timeout_s": 1.0}
    _score(nested, "a")  # starts the check process, so the timing below is the match alone
    started = time.monotonic()
    score = _score(nested, "a" * 40 + "!")
    elapsed = time.monotonic() - started
    assert score.status == "scored" and score.reward == 0.0 and not score.passed
    assert "ran past 1 s" in score.detail
    assert elapsed < 10  # the exponential match alone would take hours


@pytest.mark.e2e
def test_matches_from_threads_still_pass_after_a_runaway_match():
    nested = {"kind": "regex", "pattern": r"(a+)+b", "timeout_s": 1.0}
    assert not _score(nested, "a" * 40).passed
    with ThreadPoolExecutor(4) as threads:
        scores = list(threads.map(lambda n: _score(nested, "a" * n + "b"), range(1, 30)))
    assert all(score.passed for score in scores)
