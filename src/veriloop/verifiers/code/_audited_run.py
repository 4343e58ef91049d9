"""Running a candidate program in the sandbox under the audit hook, and reading what it did.

The host half of ``sandboxed/_audit_hook.py``: ``audited_run`` defines the program and calls
its entry point on each argument list in one sandboxed process whose audit hook was added
before the program was compiled, and returns the audited operations it performed (process
creation, ``ctypes``, frame access, files outside its directory, sockets, ...).

Reading the report: hook frames carry ``"audit"``; any of them is a finding. A forged frame
only adds a finding. Stray bytes on the channel, or a process killed outside every limit (the
hook kills its process when its report descriptor was closed or replaced), is a finding too:
the report can no longer be trusted to be complete. A run that timed out or ran out of memory
keeps the findings written before it ended.
"""

from __future__ import annotations

import ast
import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from veriloop.verifiers._registry import GraderError
from veriloop.verifiers.code._code_sandbox import CodeLimits, PythonRun, run_python
from veriloop.verifiers.code._scripts import new_nonce
from veriloop.verifiers.code.sandboxed._channel import parse_frames
from veriloop.verifiers.code.sandboxed._wire import call_key

_MODULES = ("_wire", "_channel", "_candidate_process", "_audit_hook")
_SANDBOXED = Path(__file__).parent / "sandboxed"


@dataclass(frozen=True)
class AuditReport:
    """What an audited run did: each finding as ``"event: arguments"``, in order."""

    findings: tuple[str, ...]
    status: str


@functools.cache
def _harness_source() -> str:
    """The sandboxed modules concatenated, without their imports of ``veriloop`` (the names they
    import are defined by the modules before them)."""
    parts = []
    for name in _MODULES:
        lines = (_SANDBOXED / f"{name}.py").read_text(encoding="utf-8").splitlines(keepends=True)
        for node in ast.parse("".join(lines)).body:
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("veriloop"):
                for index in range(node.lineno - 1, node.end_lineno or node.lineno):
                    lines[index] = "\n"
        parts.append("".join(lines))
    return "".join(parts)


def _script(program: str, entry_point: str, calls: Sequence[str], nonce: str) -> str:
    source = _harness_source()
    job = {"program": program, "entry_point": entry_point, "calls": list(calls), "nonce": nonce}
    payload = json.dumps(job, separators=(",", ":"))
    return f"exec(compile({source!r}, '<audited>', 'exec'))\nrun_audited_candidate(_json.loads({payload!r}))\n"


def audited_run(program: str, entry_point: str, arguments: Sequence[Sequence[Any]], limits: CodeLimits) -> AuditReport:
    """Run ``program``, calling ``entry_point(*args)`` for each of ``arguments``; what it did."""
    nonce = new_nonce()
    calls = [call_key(list(args), {}) for args in arguments]
    result = run_python([PythonRun(_script(program, entry_point, calls, nonce), limits)])[0]
    frames, problem = parse_frames(result.stdout, nonce)
    if not frames and "<audited>" in result.stderr:  # the harness itself failed before the channel opened
        raise GraderError(f"the audited run could not start: {result.stderr.strip().splitlines()[-1][:300]}")
    findings = [f"{frame.get('audit')}: {frame.get('what', '')}".strip() for frame in frames if "audit" in frame]
    if problem:
        findings.append(f"the report channel was tampered with ({problem})")
    if result.status == "killed":
        findings.append("the process was killed outside every limit (its report was silenced)")
    return AuditReport(findings=tuple(findings), status=result.status)
