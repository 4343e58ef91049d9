"""Verifier kind ``workspace_checks``: the final workspace satisfies a list of checks.

For tasks whose outcome is not a test suite: a file made, removed or rewritten, a build that
succeeds. The final workspace is the response's ``workspace`` (the task's initial one when the
response has none); it holds regular files only, so a link the agent made is not there and
passes no check. Each check is one of:

- a file test at ``path`` (a path inside the workspace; a file of that name in another folder
  is another file): ``exists`` (present or absent), ``equals`` (the file's bytes are the UTF-8
  of the text), ``contains`` (they hold it), ``matches`` (``re.search`` of a pattern on the
  file's UTF-8 text, run in the killable check pool of the ``regex`` kind, so a pattern that
  backtracks catastrophically on a crafted file fails the check after ``MATCH_TIMEOUT_S``
  instead of holding the grader);
- a ``command`` (argv) run in the sandbox on the task's environment (the plain sandbox for a
  task without one), with a fresh copy of the final workspace as its working directory. Its
  first part is looked up on the sandbox's PATH, which holds no workspace folder, so a planted
  file of that name is not what runs. Only the exit code counts, never the output (which the
  agent's files may shape); a command that runs past its ``timeout_s``, is killed or prints
  more than the sandbox keeps (1 MiB) fails.

A command's exit code is as trustworthy as the code it runs: ``python -c ...`` imports the
workspace's modules first (a planted ``json.py`` shadows the standard one), so a command that
should not run the agent's code says so (``python -I -c ...``). Hidden tests belong to
``workspace_tests``.

Reward: the fraction of checks passed, or 1/0 with ``all_or_nothing``; ``passed`` when every
check passes. Feedback names the failed checks by label or path, never the expected content.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import Field, field_validator, model_validator

from veriloop.core import ExecResult, Record, Task, WorkspaceError, workspace_path
from veriloop.verifiers._registry import GraderError, Verdict, VerifierConfig, register_verifier
from veriloop.verifiers.answers._check_pool import CheckTimeout, shared_pool
from veriloop.verifiers.answers._text import REGEX_CHECK
from veriloop.verifiers.workspace._workspace_tests import final_workspace, run_in_environment

MATCH_TIMEOUT_S = 5.0
FILE_TESTS = ("exists", "equals", "contains", "matches")
_COMMAND_FIELDS = frozenset({"exit_code", "timeout_s"})
_SHOWN = 8


class WorkspaceCheck(Record):
    """One check: ``path`` with exactly one of ``exists``, ``equals``, ``contains``, ``matches``;
    or a ``command`` with its ``exit_code`` and ``timeout_s``."""

    label: str | None = Field(default=None, description="the check's name in feedback (default: its path)")
    path: str | None = Field(default=None, description="the file tested, relative to the workspace, without '..'")
    exists: bool | None = Field(default=None, description="the file is present (true) or absent (false)")
    equals: str | None = Field(default=None, description="the file's content is exactly this text (UTF-8)")
    contains: str | None = Field(default=None, description="the file's content holds this text")
    matches: str | None = Field(default=None, description="a regular expression found in the file's text")
    command: list[str] | None = Field(default=None, description="argv run in the sandbox on the final workspace")
    exit_code: int = Field(default=0, ge=0, le=255, description="the exit code the command must end with")
    timeout_s: float = Field(default=30.0, gt=0, le=600, description="wall-clock limit of the command")

    @field_validator("path")
    @classmethod
    def _inside(cls, path: str | None) -> str | None:
        try:
            return None if path is None else workspace_path(path)
        except WorkspaceError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("matches")
    @classmethod
    def _compiles(cls, pattern: str | None) -> str | None:
        try:
            return None if pattern is None else re.compile(pattern).pattern
        except re.error as exc:
            raise ValueError(f"not a valid regular expression: {exc}") from None

    @field_validator("command")
    @classmethod
    def _argv(cls, command: list[str] | None) -> list[str] | None:
        if command is not None and (not command or not all(part and "\x00" not in part for part in command)):
            raise ValueError("a command is a non-empty list of non-empty arguments without NUL bytes")
        return command

    @model_validator(mode="after")
    def _one_test(self) -> WorkspaceCheck:
        tests = [name for name in FILE_TESTS if getattr(self, name) is not None]
        if self.command is not None:
            if self.path is not None or tests:
                raise ValueError("a command check takes no path or file test: split it into two checks")
            return self
        if len(tests) != 1:
            raise ValueError(f"give a command, or a path with exactly one of {', '.join(FILE_TESTS)} (got {tests})")
        if self.path is None:
            raise ValueError(f"the '{tests[0]}' test needs the 'path' of the file it tests")
        if misplaced := sorted(_COMMAND_FIELDS & self.model_fields_set):
            raise ValueError(f"{', '.join(misplaced)} belong to a command check")
        return self


class WorkspaceChecksConfig(VerifierConfig):
    checks: list[WorkspaceCheck] = Field(
        description="the checks, each {path, one of exists|equals|contains|matches} or "
        "{command: argv, exit_code (0), timeout_s (30)}, with an optional label"
    )
    all_or_nothing: bool = Field(default=False, description="reward 1 only when every check passes, else 0")
    memory_mb: int = Field(default=1024, ge=64, description="memory limit of each process of a command's run")

    @field_validator("checks")
    @classmethod
    def _some(cls, checks: list[WorkspaceCheck]) -> list[WorkspaceCheck]:
        if not checks:
            raise ValueError("needs at least one check, e.g. {'path': 'out.txt', 'exists': true}")
        return checks


@dataclass(frozen=True)
class CheckOutcome:
    """How one check ended; ``reason`` (for the detail) says why it failed, never what was expected."""

    passed: bool
    reason: str = ""
    environment: str | None = None


def file_outcome(check: WorkspaceCheck, files: dict[str, bytes]) -> CheckOutcome:
    """The outcome of a file test on the final workspace ``files``."""
    content = files.get(check.path or "")
    if check.exists is not None:
        return CheckOutcome((content is not None) == check.exists, "absent" if content is None else "present")
    if content is None:
        return CheckOutcome(False, "absent")
    if check.equals is not None:
        return CheckOutcome(content == check.equals.encode(), "differs")
    if check.contains is not None:
        return CheckOutcome(check.contains.encode() in content, "does not hold the text")
    return _match_outcome(check.matches or "", content)


def _match_outcome(pattern: str, content: bytes) -> CheckOutcome:
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        return CheckOutcome(False, "not UTF-8 text")
    request = {"pattern": pattern, "flags": 0, "text": text, "mode": "search"}
    try:
        found = shared_pool(REGEX_CHECK).call(request, MATCH_TIMEOUT_S)["matched"]
    except CheckTimeout:
        return CheckOutcome(False, f"the match ran past {MATCH_TIMEOUT_S:g} s and was stopped")
    return CheckOutcome(found, "no match")


def command_outcome(check: WorkspaceCheck, task: Task, files: dict[str, bytes], memory_mb: int) -> CheckOutcome:
    """The outcome of a command run on ``files``: its exit code, never its output."""
    command = check.command or []
    result = run_in_environment(task, command, files, check.timeout_s, memory_mb)
    if _not_found(command, result):
        where = f"environment {task.environment!r}" if task.environment else "the sandbox"
        raise GraderError(f"{where} cannot run {command[0]!r}: {result.detail}")
    if result.status == "timeout":
        return CheckOutcome(False, f"ran past {check.timeout_s:g} s", result.environment)
    if result.status not in ("ok", "error") or result.exit_code is None:
        ending = f"{result.status} ({result.detail})" if result.detail else result.status
        return CheckOutcome(False, f"ended: {ending}", result.environment)
    reason = f"exit code {result.exit_code}, expected {check.exit_code}"
    return CheckOutcome(result.exit_code == check.exit_code, reason, result.environment)


def _not_found(command: list[str], result: ExecResult) -> bool:
    """Whether a command named by PATH could not start: the environment lacks it (the task's
    fault). A path (``./build.sh``) that cannot start is the workspace's, and fails the check."""
    return "/" not in command[0] and result.exit_code in (126, 127) and result.detail.startswith("cannot run")


def check_name(check: WorkspaceCheck, number: int) -> str:
    """How feedback names a check: its label, its path, or its place in the list."""
    return check.label or check.path or f"check {number} (command)"


@register_verifier("workspace_checks", WorkspaceChecksConfig)
def check_workspace_checks(config: WorkspaceChecksConfig, task: Task, response: str) -> Verdict:
    """Run every check on the final workspace; reward the fraction passed (see module docs)."""
    files = final_workspace(task, response)
    outcomes = [
        command_outcome(check, task, files, config.memory_mb) if check.command else file_outcome(check, files)
        for check in config.checks
    ]
    return _tally(config, outcomes)


def _tally(config: WorkspaceChecksConfig, outcomes: list[CheckOutcome]) -> Verdict:
    failed = [(check_name(c, n), o.reason) for n, (c, o) in enumerate(zip(config.checks, outcomes), 1) if not o.passed]
    total, passed = len(outcomes), len(outcomes) - len(failed)
    complete = not failed
    reward = (1.0 if complete else 0.0) if config.all_or_nothing else passed / total
    more = " ..." if len(failed) > _SHOWN else ""
    detail = f"{passed}/{total} checks passed"
    if failed:
        detail += "; failed: " + ", ".join(f"{name} ({reason})" for name, reason in failed[:_SHOWN]) + more
    names = ", ".join(name for name, _ in failed[:_SHOWN]) + more
    feedback = "" if complete else f"{len(failed)} of {total} checks failed: {names}."
    environment = next((o.environment for o in reversed(outcomes) if o.environment), None)
    return Verdict(reward, complete, detail=detail, feedback=feedback, environment=environment)
