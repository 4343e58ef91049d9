"""Turning ``python_tests`` results into counts, a verdict and words for the model.

Everything here runs on the host, on plain data only: the test process's result frame, the
candidate's decoded return values and the reference's outputs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from veriloop.verifiers.code._candidate_calls import CallResults, Outcome
from veriloop.verifiers._registry import GraderError, Verdict
from veriloop.verifiers.code._tests_host import TestPlan
from veriloop.verifiers.code.sandboxed._shipped_callables import described
from veriloop.verifiers.code.sandboxed._wire import decode_value, loads_value

SHOWN = 3


@dataclass
class Tally:
    """Cases passed out of a total, and the first problems in words."""

    passed: int = 0
    total: int = 0
    feedback: list[str] = field(default_factory=list)
    detail: str = ""


def safe_repr(value: Any) -> str:
    """``repr(value)``, or a placeholder when it cannot be written (an int past the digit limit)."""
    try:
        return repr(value)
    except (ValueError, RecursionError, MemoryError):
        return "<a value too large to show>"


def render_call(entry_point: str, key: str, limit: int = 200) -> str:
    """``f([1, 2], k=3)`` for a call key; ``f(1).push(2)`` (roughly) for a use of a returned object."""
    data = loads_value(key, described)
    if type(data[0]) is str:  # ["$ops", base call key, [[target, kind, payload], ...]]
        _, base, operations = data
        _, kind, payload = operations[-1]
        shown = {"call": "(...)", "attr": f".{payload}", "item": f"[{safe_repr(payload)}]"}.get(kind, f" ({kind})")
        text = f"{render_call(entry_point, base, limit)}...{shown}"
        return text if len(text) <= limit else text[: limit - 4] + "...)"
    args, kwargs = data
    parts = [safe_repr(a) for a in args] + [f"{k}={safe_repr(v)}" for k, v in kwargs.items()]
    text = f"{entry_point}({', '.join(parts)})"
    return text if len(text) <= limit else text[: limit - 4] + "...)"


def render_outcome(outcome: Outcome, limit: int = 200) -> str:
    """``returned [1, 2]``, ``raised ValueError: ...`` or ``timed out (...)``."""
    if "error" in outcome:
        return outcome["error"] if outcome.get("harness") else f"raised {outcome['error']}"
    if "object" in outcome:
        return "returned a function" if outcome["object"]["callable"] else "returned an object that is not plain data"
    if "iterator" in outcome:
        text = safe_repr([decode_value(item) for item in outcome["iterator"]])
        return "returned an iterator over " + (text if len(text) <= limit else text[: limit - 3] + "...")
    text = safe_repr(decode_value(outcome["value"]))
    return "returned " + (text if len(text) <= limit else text[: limit - 3] + "...")


def _describe_failure(entry_point: str, failure: dict[str, Any], answers: dict[str, Outcome]) -> str:
    calls = failure.get("calls") or []
    key = calls[-1] if calls else None
    outcome = answers.get(key) if key else None
    call_text = render_call(entry_point, key) if key else None
    if outcome and "error" in outcome:
        return f"{call_text} {render_outcome(outcome)}."
    if "got" in failure and call_text and outcome:
        return f"{call_text} {render_outcome(outcome)}, expected {failure['expected']}."
    text = f"Test `{failure['source']}` failed" if failure.get("source") else "The tests failed"
    if call_text:
        text += f": {call_text} {render_outcome(outcome)}"
    if failure.get("error"):
        text += f" ({failure['error']})"
    return text + "."


def fixed_tally(
    entry_point: str, frame: dict[str, Any], plan: TestPlan, answers: dict[str, Outcome], dynamic: bool = False
) -> Tally:
    """Counts from the test process's frame. Cases the tests never reached (they stopped
    early) count as failed, up to the number the task's tests hold (``plan.planned``).
    When other cases exist (the tests hold cases beyond the prompt's examples, or ``dynamic``
    cases are run too), a passed visible case is left out and a failed one still counts as
    failed. ``answers`` (the candidate's outcome by call key) words the failures the frame
    names by key."""
    aborted = frame["aborted"]
    passed, failed = frame["passed"], frame["failed"] + (1 if aborted else 0)
    planned = plan.planned
    reached_hidden = passed + frame["failed"] > frame["visible_passed"] + frame["visible_failed"]
    if dynamic or planned > plan.planned_visible or reached_hidden:
        passed -= frame["visible_passed"]
        planned -= plan.planned_visible - frame["visible_failed"]
    tally = Tally(passed=passed, total=max(passed + failed, planned))
    failures = list(frame["failures"])
    if aborted:
        failures.append({**aborted, "abort": True})
    for failure in failures[:SHOWN]:
        prefix = "The tests stopped: " if failure.get("abort") else ""
        tally.feedback.append(prefix + _describe_failure(entry_point, failure, answers))
    if failures:
        where = f"line {failures[0]['line']}: " if failures[0].get("line") else ""
        tally.detail = f"first failure: {where}{tally.feedback[0]}"
    return tally


def values_match(got: Any, want: Any, rel_tol: float) -> bool:
    """Equality of plain values: integers exactly, floats (and floats against integers) within
    ``rel_tol``; containers must match in type."""
    numbers = (int, float)
    if type(got) is int and type(want) is int:
        return got == want
    if type(got) in numbers and type(want) in numbers:
        if isinstance(got, float) and isinstance(want, float) and math.isnan(got) and math.isnan(want):
            return True
        try:
            return math.isclose(got, want, rel_tol=rel_tol, abs_tol=rel_tol)
        except OverflowError:  # an int past the float range: only an exactly equal value matches
            return got == want
    if type(got) is not type(want):
        return False
    if isinstance(got, (list, tuple)):
        return len(got) == len(want) and all(values_match(a, b, rel_tol) for a, b in zip(got, want))
    if isinstance(got, dict):
        return got.keys() == want.keys() and all(values_match(got[k], want[k], rel_tol) for k in got)
    return got == want


def dynamic_tally(
    entry_point: str, suite: Sequence[tuple[str, Outcome]], results: CallResults, rel_tol: float
) -> Tally:
    """Dynamic cases: the candidate must agree with the reference, and give the same result
    when called twice on the same input (a property check)."""
    tally = Tally(total=len(suite))
    for key, gold in suite:
        outcome = results.outcomes.get(key, {"error": "gave no result", "harness": True})
        call_text = render_call(entry_point, key)
        if "error" in outcome:
            problem = f"On an extra test, {call_text} {render_outcome(outcome)}."
        elif "value" not in outcome:
            problem = f"On an extra test, {call_text} {render_outcome(outcome)}."
        elif outcome.get("repeat_differs"):
            problem = f"On an extra test, {call_text} gave different results when called twice."
        elif not values_match(decode_value(outcome["value"]), decode_value(gold["value"]), rel_tol):
            expected = render_outcome(gold).removeprefix("returned ")
            problem = f"On an extra test, {call_text} {render_outcome(outcome)}; expected {expected}."
        else:
            tally.passed += 1
            continue
        if len(tally.feedback) < SHOWN:
            tally.feedback.append(problem)
    if tally.feedback:
        tally.detail = f"dynamic: {tally.feedback[0]}"
    return tally


def verdict(tallies: Sequence[Tally], all_or_nothing: bool) -> Verdict:
    """The reward (fraction of cases passed, or all-or-nothing), detail and feedback."""
    passed = sum(t.passed for t in tallies)
    total = sum(t.total for t in tallies)
    if total == 0:
        raise GraderError("no test case was run")
    all_passed = passed == total
    reward = float(all_passed) if all_or_nothing else passed / total
    detail = f"{passed}/{total} test cases passed"
    problems = [t.detail for t in tallies if t.detail]
    if problems:
        detail += "; " + "; ".join(problems)
    if all_passed:
        return Verdict(reward, True, detail=detail, feedback=f"All {total} tests passed.")
    feedback = [line for t in tallies for line in t.feedback][:SHOWN]
    return Verdict(
        reward, False, detail=detail, feedback=" ".join([f"{total - passed} of {total} tests failed.", *feedback])
    )


def failed_to_run(reason: str, entry_point: str) -> Verdict:
    """Reward 0: the program did not load (syntax error, early exit, missing function)."""
    return Verdict(
        0.0,
        False,
        detail=f"the program did not run: {reason}",
        feedback=f"Your code could not be run: {reason}. Return the complete function `{entry_point}`.",
    )


def tampered(problem: str) -> Verdict:
    """Reward 0: something other than the harness wrote to the result channel."""
    return Verdict(
        0.0,
        False,
        detail=f"result channel tampered with: {problem}",
        feedback="Your program interfered with the test harness. Return results from the function; "
        "do not print or write them anywhere else.",
    )


def tests_did_not_finish(why: str) -> Verdict:
    """Reward 0: the task's tests, which run fine otherwise, could not finish on the answer's
    results (they ran out of time or memory on a huge or pathological value)."""
    return Verdict(
        0.0,
        False,
        detail=f"the tests could not finish on the results ({why})",
        feedback="The tests could not finish on the values your function returned. Return plain values of a "
        "sensible size.",
    )
