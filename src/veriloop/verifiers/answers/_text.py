"""Verifier kinds on plain text: ``exact`` and ``regex``.

A regex match runs in the killable check pool (``_check_pool.py``, target ``_regex_check.py``),
not in the caller: a pattern that backtracks catastrophically on an adversarial answer would
otherwise hold the caller's thread (and the GIL) for as long as it likes, and Python cannot
interrupt a running match. A match that passes ``timeout_s`` has its process killed and the
answer fails (reward 0): the answer, not the grader, made the match run away.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from veriloop.core import Task
from veriloop.verifiers._registry import Verdict, VerifierConfig, register_verifier
from veriloop.verifiers.answers._check_pool import CheckTimeout, shared_pool

REGEX_CHECK = "veriloop.verifiers.answers._regex_check:match_regex"


def _normalise(text: str, strip: bool, case_sensitive: bool) -> str:
    if strip:
        text = " ".join(text.split())
    return text if case_sensitive else text.casefold()


class ExactConfig(VerifierConfig):
    answer: str | None = Field(default=None, description="expected answer; defaults to the task's gold")
    case_sensitive: bool = Field(default=True, description="compare letter case")
    strip: bool = Field(default=True, description="collapse and trim whitespace before comparing")
    extract: Literal["full", "last_line"] = Field(
        default="full", description="compare the whole response or only its last non-empty line"
    )
    strip_prefix: str = Field(
        default="", description="text removed once from the start of the (trimmed) answer before comparing"
    )


@register_verifier("exact", ExactConfig)
def check_exact(config: ExactConfig, task: Task, response: str) -> Verdict:
    """Full credit when the (normalised) response equals the expected answer, else 0."""
    expected = config.answer if config.answer is not None else task.gold
    if expected is None:
        raise ValueError("exact verifier needs 'answer' or a task 'gold'")
    candidate = response.strip().removeprefix(config.strip_prefix) if config.strip_prefix else response
    if config.extract == "last_line":
        lines = [line for line in response.splitlines() if line.strip()]
        candidate = lines[-1] if lines else ""
    got = _normalise(candidate, config.strip, config.case_sensitive)
    want = _normalise(str(expected), config.strip, config.case_sensitive)
    if got == want:
        return Verdict(1.0, True, detail="exact match")
    shown = candidate.strip()[:200]
    return Verdict(0.0, False, detail="no exact match", feedback=f"Expected a different answer; got {shown!r}.")


class RegexConfig(VerifierConfig):
    pattern: str = Field(description="Python regular expression the response must match")
    mode: Literal["fullmatch", "search"] = Field(
        default="fullmatch", description="match the whole (stripped) response, or find it anywhere"
    )
    ignore_case: bool = Field(default=False, description="case-insensitive matching")
    timeout_s: float = Field(
        default=2.0, gt=0, le=600, description="hard wall-clock limit of one match; a match past it fails the answer"
    )

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, pattern: str) -> str:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"not a valid regular expression: {exc}") from None
        return pattern


@register_verifier("regex", RegexConfig)
def check_regex(config: RegexConfig, task: Task, response: str) -> Verdict:
    """Full credit when the response matches the pattern (a format rule), else 0."""
    request = {
        "pattern": config.pattern,
        "flags": int(re.IGNORECASE if config.ignore_case else 0),
        "text": response.strip(),
        "mode": config.mode,
    }
    try:
        matched = shared_pool(REGEX_CHECK).call(request, config.timeout_s)["matched"]
    except CheckTimeout:
        return Verdict(
            0.0,
            False,
            detail=f"pattern match ran past {config.timeout_s:g} s and was stopped",
            feedback=f"The answer must match the format /{config.pattern}/.",
        )
    if matched:
        return Verdict(1.0, True, detail="pattern matched")
    return Verdict(
        0.0,
        False,
        detail="pattern did not match",
        feedback=f"The answer must match the format /{config.pattern}/.",
    )
