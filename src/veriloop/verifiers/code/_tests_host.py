"""The host's side of the test process (``sandboxed/_tests_process.py``): running a task's tests
against recorded results.

Several items (one task's tests against one candidate's plain results) share a process,
``TEST_BATCH`` at a time: all of it is the task set's own code and plain data. The task's
prompt code and instrumented tests are compiled once on the host and shipped marshalled when
the sandbox's interpreter reads that format. A task's plan (the inputs its tests use) is
learned by running its tests with no results known, once per process.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from veriloop.verifiers.code._candidate_calls import Outcome
from veriloop.verifiers.code.sandboxed._channel import parse_frames
from veriloop.verifiers.code._code_sandbox import CodeLimits, PythonRun, preloaded_in, run_python, sandbox_tag
from veriloop.verifiers._memo import Memo
from veriloop.verifiers._registry import GraderError
from veriloop.verifiers.code.sandboxed._tests_process import load_tests
from veriloop.verifiers.code._scripts import build_script, compiled_blob, interpreter_tag, new_nonce

TEST_BATCH = 8


class TestSource(Protocol):
    """What the test process needs of a task's configuration."""

    prompt_code: str
    tests: str
    entry_point: str
    seed: int

    def test_limits(self) -> CodeLimits: ...


@dataclass(frozen=True)
class TestPlan:
    """The inputs the fixed tests call the function with, how many cases they hold, and how
    many of those test only examples shown in the prompt."""

    calls: tuple[str, ...]
    planned: int
    planned_visible: int = 0


Visible = tuple[str, ...]
"""Call keys of the examples shown in the prompt (sorted)."""


_plans: Memo[TestPlan] = Memo()
_compiled_tests: Memo[str] = Memo()


def _code_key(source: TestSource) -> str:
    text = "\0".join((source.prompt_code, source.tests, source.entry_point))
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _compiled(source: TestSource) -> str:
    return _compiled_tests.get(
        _code_key(source), lambda: compiled_blob(load_tests(source.prompt_code, source.tests, source.entry_point))
    )


def _test_run(chunk: Sequence[tuple[TestSource, dict[str, Outcome], Visible]]) -> tuple[PythonRun, str]:
    nonce = new_nonce()
    precompiled = sandbox_tag() == interpreter_tag()
    items, compiled = [], {}
    for source, answers, visible in chunk:
        item = {
            "visible": list(visible),
            "prompt_code": source.prompt_code,
            "tests": source.tests,
            "entry_point": source.entry_point,
            "answers": answers,
            "seed": source.seed,
        }
        if precompiled:
            item["code_key"] = _code_key(source)
            compiled[item["code_key"]] = _compiled(source)
        items.append(item)
    limits = [source.test_limits() for source, _, _ in chunk]
    combined = CodeLimits(max(each.timeout_s for each in limits), max(each.memory_mb for each in limits))
    job = {"items": items, "compiled": compiled, "nonce": nonce}
    script = build_script("_tests_process", "run_tests", job, sandbox_tag, preloaded_in(None))
    return PythonRun(script, combined), nonce


class UnsupportedTests(GraderError):
    """The tests do something that cannot be graded across processes (the message says what,
    and on which line): a problem of the task, which ``tasks validate`` reports."""


def _checked(frame: dict[str, Any]) -> dict[str, Any] | GraderError:
    if "load_error" in frame:
        return GraderError(f"the task's tests do not load: {frame['load_error']}")
    if "unsupported" in frame:
        return UnsupportedTests(str(frame["unsupported"]))
    return frame


def evaluate_tests(
    requests: Sequence[tuple[TestSource, dict[str, Outcome], Visible]],
) -> list[dict[str, Any] | GraderError]:
    """Each task's tests against its recorded results (cases testing only ``Visible`` calls
    counted apart): a result frame, or why it failed.

    A process that dies part-way (a test that hangs or crashes) is retried one item per
    process, so one bad item costs only itself. When an item's own process fails on a
    candidate's results (its tests ran out of time or memory on them), its frame is
    ``{"process_failed": why}``: the candidate's failure, not the grader's. With no results
    (learning a plan), that failure is the grader's, a GraderError.
    """
    outcomes: list[dict[str, Any] | GraderError] = [GraderError("not evaluated")] * len(requests)
    todo, size = list(range(len(requests))), TEST_BATCH
    while todo:
        chunks = [todo[i : i + size] for i in range(0, len(todo), size)]
        runs = [_test_run([requests[i] for i in chunk]) for chunk in chunks]
        retry = []
        for chunk, (_, nonce), result in zip(chunks, runs, run_python([run for run, _ in runs])):
            frames, problem = parse_frames(result.stdout, nonce)
            by_item = {} if problem else {frame.pop("item", None): frame for frame in frames}
            for position, index in enumerate(chunk):
                if position in by_item:
                    outcomes[index] = _checked(by_item[position])
                elif len(chunk) > 1:
                    retry.append(index)
                else:
                    why = f"{result.status}, exit code {result.exit_code}" + (
                        f", {result.detail}" if result.detail else ""
                    )
                    if requests[index][1]:
                        outcomes[index] = {"process_failed": why}
                    else:
                        outcomes[index] = GraderError(f"the test process failed ({why}): {result.stderr[-300:]}")
        todo, size = retry, 1
    return outcomes


def plans_for(sources: Sequence[TestSource], visible: Sequence[Visible]) -> list[TestPlan | GraderError]:
    """The plan of each task's tests: cached, or learned by one batched run with no results."""
    keys = [(s.prompt_code, s.tests, s.entry_point, s.seed, shown) for s, shown in zip(sources, visible)]
    missing = {key: source for key, source in zip(keys, sources) if _plans.peek(key) is None}
    errors: dict[tuple[str, str, str, int, Visible], GraderError] = {}
    plan_runs = [(source, {}, key[-1]) for key, source in missing.items()]
    for (key, source), frame in zip(missing.items(), evaluate_tests(plan_runs)):
        if isinstance(frame, GraderError):
            errors[key] = frame
        elif not frame["new_calls"]:
            errors[key] = GraderError(f"the tests never call {source.entry_point}")
        else:
            planned, shown = frame["passed"] + frame["failed"], frame["visible_passed"] + frame["visible_failed"]
            _plans.put(key, TestPlan(calls=tuple(frame["new_calls"]), planned=planned, planned_visible=shown))
    return [errors.get(key) or _plans.peek(key) or GraderError("the plan was evicted; retry") for key in keys]
