"""The ``math`` verifier kind: math-verify equivalence with a hard time limit from any thread.

The comparison runs in a shared pool of killable check processes (``_check_pool.py``); a check
that passes ``timeout_s`` has its process killed and becomes an ``infra_error`` score (or a
reward of 0 with ``on_timeout: zero``). It never hangs the caller and never relies on
signals, so it works from threads, thread pools and worker processes alike.

Hedging gets no credit: several final answers that are not all equivalent, or one final answer
that offers alternatives ("7 or 8", "7, 8", "7 \\text{ or maybe } 8"), score 0 when the gold
answer is a single value. When the gold answer is a number, so must the final answer be: an
expression that evaluates to it ("37 \\cdot 43", a binomial, a sum) scores 0. Percent signs are
read as units, never as a factor of 1/100; every minus sign (U+2212 too) is a minus; an interval
is one answer and never equals a finite set. An equation whose sides state two different values
(``x = 5 = 7``, ``2+3 = 6``) scores 0: an answer that says two things says neither. An inequality
of one variable, ``x \\in`` an interval and the bare interval are the same answer (``2 < x \\le 5``,
``(2, 5]``) whichever is the gold (see ``_math_check.py`` and ``_math_relations.py``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from veriloop.core import Task
from veriloop.verifiers._registry import GraderError, Verdict, VerifierConfig, register_verifier
from veriloop.verifiers.answers._check_pool import CheckTimeout, shared_pool

MATH_CHECK = "veriloop.verifiers.answers._math_check:check_math_answer"


class MathConfig(VerifierConfig):
    answer: str | int | float | None = Field(
        default=None, description="expected answer (LaTeX or plain); defaults to the task's gold"
    )
    timeout_s: float = Field(default=5.0, gt=0, le=600, description="hard wall-clock limit of one check")
    on_timeout: Literal["infra_error", "zero"] = Field(
        default="infra_error", description="score of a check that ran out of time"
    )
    fallback: Literal["last_line", "none"] = Field(
        default="last_line",
        description="where to look when no \\boxed{}, <answer> tag or 'answer is' line marks the answer",
    )
    reveal_expected: bool = Field(default=False, description="name the expected answer in feedback")
    float_rounding: int = Field(default=6, ge=0, le=30, description="decimal places floats are rounded to")
    numeric_precision: int = Field(default=15, ge=1, le=100, description="significant digits of numeric comparison")
    strict: bool = Field(default=True, description="variable names matter; sets and tuples differ")
    max_chars: int = Field(
        default=200_000, ge=1, description="only this many trailing characters of a response are read"
    )


def math_request(config: MathConfig, gold: Any, response: str) -> dict[str, Any]:
    """The plain-data request that the math check process receives."""
    return {
        "gold": str(gold),
        "response": response[-config.max_chars :],
        "options": {
            "fallback": config.fallback,
            "reveal_expected": config.reveal_expected,
            "float_rounding": config.float_rounding,
            "numeric_precision": config.numeric_precision,
            "strict": config.strict,
        },
    }


@register_verifier("math", MathConfig)
def check_math(config: MathConfig, task: Task, response: str) -> Verdict:
    """Full credit when the one final answer is mathematically equivalent to the gold answer."""
    gold = config.answer if config.answer is not None else task.gold
    if gold is None:
        raise GraderError("math verifier needs 'answer' or a task 'gold'")
    try:
        result = shared_pool(MATH_CHECK).call(math_request(config, gold, response), config.timeout_s)
    except CheckTimeout as exc:
        if config.on_timeout == "infra_error":
            raise
        return Verdict(
            0.0,
            False,
            detail=f"math check timed out: {exc}",
            feedback="Your answer could not be checked in time; give a simpler final answer.",
        )
    return Verdict(
        reward=float(result["reward"]),
        passed=bool(result["passed"]),
        detail=result["detail"],
        feedback=result["feedback"],
    )
