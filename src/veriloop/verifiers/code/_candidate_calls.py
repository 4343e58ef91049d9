"""Calling a candidate's function on many inputs in its own sandboxed process.

One process per candidate runs all its inputs (the fast path); it reports each result as
soon as the call returns. Many candidates' processes run at once across the sandbox
workers, never two candidates in one process. When the process dies during a call (an
exit, a crash, a memory limit), that call fails with the reason and the process is started
again for the calls after it, a bounded number of times. A time limit ends the batch: the
remaining calls fail as timed out, so a program that loops forever costs one time limit, not one per input.

An ``audited`` request runs the same process under the audit hook (``sandboxed/_audit_hook.py``,
added before the program compiles): its reports travel on the result channel beside the
results, and come back as ``findings``, so what the graded run did is judged, not a rerun.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from veriloop.core import ExecResult
from veriloop.verifiers.code._audited_run import audit_findings, audited_script
from veriloop.verifiers.code.sandboxed._channel import parse_frames
from veriloop.verifiers.code._code_sandbox import CodeLimits, PythonRun, preloaded_in, run_python, sandbox_tag
from veriloop.verifiers.code._scripts import build_script, new_nonce
from veriloop.verifiers.code.sandboxed._wire import NotPlainData, decode_value

MAX_RESTARTS = 3
STDERR_KEPT = 2000

Outcome = dict[str, Any]
"""``{"value": <encoded plain value>}``, ``{"iterator": [<encoded items>], "complete": bool}`` (a
returned generator's items, with ``"error"`` when it raised part-way), ``{"object": {"callable":
bool}}`` (another object, used by the tests through further calls) or ``{"error": "..."}``; ``"harness": True`` marks an error
worded by the harness (a limit, an exit, a value that is not plain data) rather than an
exception the function raised, whose class names (its own first) are ``"raised"``; ``"mutated"`` lists ``[position or keyword,
encoded value]`` for each argument the call changed in place; ``"repeat_differs"`` marks a call that gave another result
when repeated (set here, on the host, from the repeated call's outcome, ``"again"`` in its frame:
the candidate's process only reports, it never compares)."""


@dataclass(frozen=True)
class CallRequest:
    """Call ``entry_point`` of ``program`` once per call key (twice for keys in ``repeat``)."""

    program: str
    entry_point: str
    calls: Sequence[str]
    limits: CodeLimits
    repeat: Sequence[str] = ()
    audited: bool = False
    environment: str | None = None  # the task's, whose packages the program may import
    stderr: bool = False  # keep what the program writes to stderr (else it goes to /dev/null)


@dataclass
class CallResults:
    """The outcome of each call key, or why the program could not run at all; for an audited
    request, what the audit hook reported (``"event: arguments"``, in order); what the program
    wrote to stderr over all its runs (warnings included), up to ``STDERR_KEPT`` characters."""

    outcomes: dict[str, Outcome] = field(default_factory=dict)
    load_error: str | None = None
    tampered: str | None = None
    findings: list[str] = field(default_factory=list)
    stderr: str = ""


def _ended(result: ExecResult) -> str:
    """Why a process ended without reporting, as words for feedback."""
    words = {
        "timeout": "timed out",
        "memory_limit": "ran out of memory",
        "output_limit": "produced too much output",
        "killed": "was killed",
    }
    text = words.get(result.status, f"ended the process (exit code {result.exit_code})")
    return f"{text} ({result.detail})" if result.detail else text


_OUTCOME_FIELDS = ("value", "iterator", "complete", "object", "error", "raised", "mutated", "harness")


def _valid(frame: dict[str, Any], count: int) -> bool:
    index = frame.get("i")
    if type(index) is not int or not 0 <= index < count:
        return False
    mutated = frame.get("mutated", [])
    if type(mutated) is not list or not all(
        type(m) is list and len(m) == 2 and type(m[0]) in (int, str) for m in mutated
    ):
        return False
    try:
        for _, value in mutated:
            decode_value(value)
        if "value" in frame:
            decode_value(frame["value"])
            return True
        if "iterator" in frame:
            if type(frame["iterator"]) is not list or type(frame.get("complete")) is not bool:
                return False
            for item in frame["iterator"]:
                decode_value(item)
            return "error" not in frame or isinstance(frame["error"], str)
    except (NotPlainData, RecursionError):
        return False
    if "object" in frame:
        return (
            type(frame["object"]) is dict
            and frame["object"].keys() == {"callable"}
            and type(frame["object"]["callable"]) is bool
        )
    raised = frame.get("raised", [])
    return isinstance(frame.get("error"), str) and type(raised) is list and all(type(n) is str for n in raised)


def _fields(outcome: dict[str, Any]) -> dict[str, Any]:
    return {k: outcome[k] for k in _OUTCOME_FIELDS if k in outcome}


def _absorb(result: ExecResult, nonce: str, batch: list[str], out: CallResults, audited: bool) -> set[int] | None:
    """Record the frames of one run; the indices (within ``batch``) that got an answer.

    None when the run ended the batch: the program did not load, or the channel was forged.
    """
    frames, problem = parse_frames(result.stdout, nonce)
    out.stderr = (out.stderr + result.stderr)[:STDERR_KEPT]
    if audited:
        findings, frames = audit_findings(frames, result)
        out.findings += findings
    if not problem and frames and "load_error" in frames[0]:
        out.load_error = str(frames[0]["load_error"])
        return None
    if not problem and (not frames or frames[0] != {"loaded": True}):
        out.load_error = f"the program {_ended(result)} while it was being defined"
        return None
    answered: set[int] = set()
    for frame in frames[1:]:
        if problem or not _valid(frame, len(batch)) or frame["i"] in answered:
            problem = problem or "malformed or repeated frame on the result channel"
            break
        index = frame.pop("i")
        answered.add(index)
        outcome = _fields(frame)
        if "again" in frame:
            again = frame["again"]
            outcome["repeat_differs"] = type(again) is not dict or _fields(again) != outcome
        out.outcomes[batch[index]] = outcome
    if problem:
        out.tampered = problem
        return None
    return answered


@dataclass
class _Progress:
    request: CallRequest
    out: CallResults = field(default_factory=CallResults)
    pending: list[str] = field(default_factory=list)
    nonce: str = ""


def _script(state: _Progress) -> PythonRun:
    state.nonce = new_nonce()
    twice = set(state.request.repeat)
    job = {
        "program": state.request.program,
        "entry_point": state.request.entry_point,
        "calls": state.pending,
        "nonce": state.nonce,
        "repeat": [i for i, key in enumerate(state.pending) if key in twice],
        "stderr": state.request.stderr,
    }
    script = (
        audited_script(job)
        if state.request.audited
        else build_script(
            "_candidate_process", "run_candidate", job, sandbox_tag, preloaded_in(state.request.environment)
        )
    )
    return PythonRun(script, state.request.limits, environment=state.request.environment)


def _advance(state: _Progress, result: ExecResult) -> None:
    """Take one run's answers; leave in ``pending`` what must run again (empty when done)."""
    pending, out = state.pending, state.out
    answered = _absorb(result, state.nonce, pending, out, state.request.audited)
    if answered is None:
        state.pending = []
        return
    missing = [i for i in range(len(pending)) if i not in answered]
    state.pending = []
    if not missing:
        return
    out.outcomes[pending[missing[0]]] = {"error": _ended(result), "harness": True}
    rest = [pending[i] for i in missing[1:]]
    if result.status == "timeout":
        for key in rest:
            out.outcomes[key] = {"error": "was not run: an earlier call used up the time limit", "harness": True}
    else:
        state.pending = rest


def call_candidates(requests: Sequence[CallRequest]) -> list[CallResults]:
    """Run every request, each in its own process (restarted after a crash); results in order."""
    states = [_Progress(request, pending=list(dict.fromkeys(request.calls))) for request in requests]
    for _ in range(MAX_RESTARTS + 1):
        active = [state for state in states if state.pending]
        if not active:
            break
        for state, result in zip(active, run_python([_script(state) for state in active])):
            _advance(state, result)
    for state in states:
        for key in state.pending:
            state.out.outcomes[key] = {
                "error": "was not run: the program ended its process too many times",
                "harness": True,
            }
    return [state.out for state in states]


def call_candidate(
    program: str,
    entry_point: str,
    calls: Sequence[str],
    limits: CodeLimits,
    repeat: Sequence[str] = (),
    environment: str | None = None,
) -> CallResults:
    """``call_candidates`` for one program."""
    return call_candidates([CallRequest(program, entry_point, calls, limits, repeat, environment=environment)])[0]
