"""The math kind: equivalences, near misses, hedging, hard timeouts from threads, infra errors."""

from __future__ import annotations

import threading
import time

import pytest

from veriloop.core import Response, Task
from veriloop.verifiers import verify


def score(response: str, gold, **fields):
    task = Task(id="t", domain="math", prompt="p", verifier={"kind": "math", **fields}, gold=gold)
    return verify(task, Response(id="r", task_id="t", response=response))


@pytest.mark.parametrize(
    ("response", "gold"),
    [
        ("The answer is \\boxed{42}.", "42"),
        ("So we get $\\boxed{\\frac{1}{2}}$", "0.5"),
        ("so the probability is 0.5", "\\frac{1}{2}"),
        ("\\boxed{\\dfrac{3}{4}}", "3/4"),
        ("\\boxed{0.750}", "\\frac34"),
        ("\\boxed{3\\sqrt{2}}", "\\sqrt{18}"),
        ("\\boxed{\\frac{\\pi}{2}}", "\\pi/2"),
        ("Natalia sold 72 clips.\n#### 72", "72"),
        ("Final answer: 1,000", "1000"),
        ("The answer is -7", "-7"),
        ("48 / 2 = 24\n24 + 48 = 72\n72", "72"),
        ("Therefore x = 3", "3"),
        ("<answer>12</answer>", "12"),
        ("\\boxed{(1, 2)}", "(1,2)"),
        ("\\boxed{2} and \\boxed{3}", "\\{2, 3\\}"),
        ("\\boxed{x^2 + 2x + 1}", "(x+1)^2"),
        ("I computed 3 + 5 = 8. The answer is \\boxed{8} and I checked: \\boxed{8}", "8"),
    ],
)
def test_equivalent_answers_pass(response, gold):
    result = score(response, gold)
    assert result.passed and result.reward == 1.0, result.detail
    assert result.feedback == "Correct."


@pytest.mark.parametrize(
    ("response", "gold"),
    [
        ("\\boxed{43}", "42"),
        ("\\boxed{0.51}", "\\frac{1}{2}"),
        ("\\boxed{1.0001}", "1"),
        ("\\boxed{\\frac{2}{3}}", "0.6667"),
        ("\\boxed{4\\sqrt{2}}", "\\sqrt{18}"),
        ("#### 7", "-7"),
        ("\\boxed{x^2 + 1}", "(x+1)^2"),
    ],
)
def test_near_misses_score_zero(response, gold):
    result = score(response, gold)
    assert result.status == "scored" and result.reward == 0.0 and not result.passed
    assert "not correct" in result.feedback


@pytest.mark.parametrize(
    "response",
    [
        "\\boxed{41} or maybe \\boxed{42}",
        "The answer is 41 or 42",
        "The answer is 41 and 42",
        "The answer is 40, 41, 42",
        "40 41 42",
        "Answer: 41; 42",
        "\\boxed{42 \\text{ or } 41}",
        "The answer is 41.\nThe answer is 42.",
        "<answer>41</answer><answer>42</answer>",
        "41\n42",
        "41\n\nSo it must be 42",
    ],
)
def test_hedging_gets_nothing(response):
    result = score(response, "42")
    assert result.reward == 0.0 and result.status == "scored"
    assert "several different final answers" in result.detail
    assert "exactly one" in result.feedback


def test_a_list_in_one_box_is_not_a_single_value():
    assert score("\\boxed{40, 41, 42}", "42").reward == 0.0


def test_no_final_answer_feedback():
    result = score("I am not sure.", "42", fallback="none")
    assert result.reward == 0.0 and "No final answer" in result.feedback
    assert score("words only", "42").detail.endswith("could not be read as math")


def test_reveal_expected_names_the_gold_answer():
    assert "expected answer is 42" in score("\\boxed{41}", "42", reveal_expected=True).feedback
    assert "42" not in score("\\boxed{41}", "42").feedback


def test_answer_field_overrides_gold():
    assert score("\\boxed{5}", None, answer="5").passed


def test_missing_or_unreadable_gold_is_an_infra_error():
    missing = score("\\boxed{5}", None)
    assert missing.status == "infra_error" and missing.reward is None
    assert "needs 'answer'" in missing.detail
    unreadable = score("\\boxed{5}", "\\frac{")
    assert unreadable.status == "infra_error" and "could not be parsed" in unreadable.detail


# 9^(9^9) has hundreds of millions of digits: sympy evaluates it eagerly and never returns in time.
STALLING = "\\boxed{9^{9^{9}}}"


@pytest.mark.e2e
def test_timeout_from_threads_gives_an_infra_error_not_a_hang():
    results = {}

    def run(index):
        started = time.monotonic()
        results[index] = (score(STALLING, "\\sqrt{2}", timeout_s=1.5), time.monotonic() - started)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)
    for result, elapsed in results.values():
        assert result.status == "infra_error" and result.reward is None
        assert "took longer than 1.5 s" in result.detail
        assert elapsed < 30
    assert score("\\boxed{5}", "5").passed  # the pool recovered


def test_timeout_can_score_zero_instead():
    result = score(STALLING, "\\sqrt{2}", timeout_s=1, on_timeout="zero")
    assert result.status == "scored" and result.reward == 0.0 and "timed out" in result.detail


@pytest.mark.e2e
def test_check_from_a_worker_thread_with_many_calls():
    tasks = [(f"\\boxed{{{n}}}", str(n if n % 3 else n + 1)) for n in range(60)]
    outcomes = []
    lock = threading.Lock()

    def run(chunk):
        for response, gold in chunk:
            with lock:
                outcomes.append((response, gold, score(response, gold).passed))

    threads = [threading.Thread(target=run, args=(tasks[i::4],)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(outcomes) == 60
    assert all(passed == (response == f"\\boxed{{{gold}}}") for response, gold, passed in outcomes)
