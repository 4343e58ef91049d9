"""Verifier kind ``stdio``: a whole program, given stdin, judged on its stdout.

The program is in the task's ``language`` (Python unless it says otherwise; C and C++ are
compiled once per response by the system gcc/g++, in a run of their own). Each test case runs
it in a fresh sandboxed process that receives only that case's input; the expected output
stays in the host, which compares after the process has ended. A case passes when the
program exits normally (status ok, exit code 0) and its output matches under the configured
normalisation. The program's stdout is its answer, so nothing it prints can forge a verdict;
an early clean exit just ends its answer early. An answer fenced as another language, or a
program that does not compile, fails with feedback saying so.
"""

from __future__ import annotations

import decimal
import math
import random
import re
import unicodedata
from typing import Literal

from pydantic import Field, field_validator, model_validator

from veriloop.core import ExecResult, Record, Task
from veriloop.verifiers.code._code_sandbox import CodeLimits, run_program
from veriloop.verifiers.code._dynamic import mutate_stdin
from veriloop.verifiers.code._extract import LANGUAGE_NAMES, extract_program
from veriloop.verifiers._memo import Memo
from veriloop.verifiers._registry import GraderError, Verdict, VerifierConfig, register_verifier

_SHOWN = 2
_CLIP = 300
_COMPILER_LINES = 5


class StdioCase(Record):
    """One program run: what it reads and what it must print."""

    input: str = Field(default="", description="text fed on stdin")
    output: str = Field(description="expected stdout")


class StdioConfig(VerifierConfig):
    cases: list[StdioCase] = Field(default_factory=list, description="fixed test cases")
    language: str = Field(
        default="python", description="language of the program: python, cpp (g++ -std=c++17), c (gcc) or bash"
    )
    compare: Literal["exact", "lines", "tokens", "numbers"] = Field(
        default="lines",
        description="exact text; lines (trailing spaces and blank lines ignored); tokens (any whitespace); "
        "numbers (tokens; integers exactly, other numbers within rel_tol; ASCII digits only)",
    )
    case_sensitive: bool = Field(default=True, description="compare letter case")
    rel_tol: float = Field(default=1e-6, ge=0, le=1, description="tolerance of numbers under compare 'numbers'")
    unicode_digits: bool = Field(
        default=False,
        description="under compare 'numbers', also read digits of other scripts ('\u0663' as 3); "
        "off: only ASCII digits are numbers",
    )
    suite: Literal["fixed", "dynamic", "both"] = Field(
        default="fixed", description="fixed cases, dynamic inputs judged by the gold program, or both"
    )
    dynamic_cases: int = Field(default=10, ge=1, le=500, description="number of dynamic inputs")
    seed: int = Field(default=0, description="seed of the dynamic inputs")
    scoring: Literal["partial", "all_or_nothing"] = Field(
        default="partial", description="fraction of cases passed, or 1 only when every case passes"
    )
    timeout_s: float = Field(default=5.0, gt=0, le=600, description="time limit of each run")
    memory_mb: int = Field(default=512, ge=64, le=65536, description="memory limit of each run, MiB")

    @field_validator("language")
    @classmethod
    def _known_language(cls, value: str) -> str:
        from veriloop.sandbox import LANGUAGES

        if value not in LANGUAGES:
            raise ValueError(f"unknown language {value!r}; choose one of: {', '.join(LANGUAGES.names())}")
        return value

    @model_validator(mode="after")
    def _has_cases(self) -> StdioConfig:
        if not self.cases:
            raise ValueError("needs at least one case ({'input': ..., 'output': ...}), also to seed dynamic inputs")
        return self

    def limits(self) -> CodeLimits:
        return CodeLimits(self.timeout_s, self.memory_mb)


def normalise_output(text: str, config: StdioConfig) -> list[str] | str:
    """The comparable form of a program's output under ``config.compare``."""
    if not config.case_sensitive:
        text = text.casefold()
    if config.compare == "exact":
        return text
    if config.compare == "lines":
        lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
        while lines and not lines[-1]:
            lines.pop()
        return lines
    return text.split()


def outputs_match(got: str, want: str, config: StdioConfig) -> bool:
    a, b = normalise_output(got, config), normalise_output(want, config)
    if config.compare != "numbers":
        return a == b
    if config.unicode_digits:
        a, b = [_ascii_digits(token) for token in a], [_ascii_digits(token) for token in b]
    return len(a) == len(b) and all(_token_match(x, y, config.rel_tol) for x, y in zip(a, b))


def _ascii_digits(token: str) -> str:
    """``token`` with each decimal digit of any script written as its ASCII digit."""
    return "".join(str(unicodedata.decimal(char)) if char.isdecimal() else char for char in token)


_INTEGER = re.compile(r"[+-]?[0-9]+", re.ASCII)
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)


def _integer_text(token: str) -> str:
    """The canonical text of an integer token: no plus sign, no leading zeros, no minus on zero.

    Compared as text, so integers of any length are exact (``int()`` refuses long digit strings).
    """
    negative = token.startswith("-")
    digits = token.lstrip("+-").lstrip("0") or "0"
    return "-" + digits if negative and digits != "0" else digits


def _token_match(got: str, want: str, rel_tol: float) -> bool:
    """Numbers as the task's text writes them: ASCII digits only (``float()`` would also read
    other scripts' digits, ``1_000``, ``nan`` and ``inf``). An expected integer is met by the
    same integer exactly, or by a decimal within ``rel_tol`` of it in absolute terms (``6.0``
    for ``6``, never ``1000000000001.0`` for ``1000000000000``); other numbers within ``rel_tol``."""
    if got == want:
        return True
    if _INTEGER.fullmatch(want) and _INTEGER.fullmatch(got):
        return _integer_text(got) == _integer_text(want)
    if not (_DECIMAL.fullmatch(got) and _DECIMAL.fullmatch(want)):
        return False
    if _INTEGER.fullmatch(want):
        return _exactly_within(got, want, rel_tol)
    try:
        x, y = float(got), float(want)
    except (ValueError, OverflowError):
        return False
    return math.isfinite(x) and math.isfinite(y) and math.isclose(x, y, rel_tol=rel_tol, abs_tol=rel_tol)


def _exactly_within(got: str, want: str, abs_tol: float) -> bool:
    """``|got - want| <= abs_tol`` in exact decimal arithmetic (enough digits for both tokens)."""
    context = decimal.Context(
        prec=len(got) + len(want) + 10, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN, traps=[decimal.InvalidOperation]
    )
    try:
        difference = context.subtract(decimal.Decimal(got), decimal.Decimal(want))
        return context.compare(context.abs(difference), decimal.Decimal(abs_tol)) <= 0
    except (decimal.DecimalException, ValueError):
        return False


def _clip(text: str) -> str:
    return repr(text if len(text) <= _CLIP else text[:_CLIP] + "...")


def _run_failure(result: ExecResult) -> str | None:
    """Why a run does not count as a normal exit, or None."""
    if result.status == "ok":
        return None
    if result.status == "error":
        lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
        last = lines[-1].strip() if lines else f"exit code {result.exit_code}"
        return f"crashed ({last[:_CLIP]})"
    words = {"timeout": "timed out", "memory_limit": "ran out of memory", "output_limit": "printed too much"}
    return words.get(result.status, f"was killed ({result.detail})")


def _compiler_message(build: ExecResult) -> str:
    """The compiler's first error lines, or how its run ended; GraderError when it could not start."""
    if "cannot run" in build.detail:  # no compiler in the sandbox: the grader's failure, not the answer's
        raise GraderError(f"the sandbox cannot build the program: {build.detail}")
    if build.status != "error":
        return f"the compiler {_run_failure(build)}"
    lines = [line for line in build.stderr.splitlines() if line.strip()]
    first_error = next((number for number, line in enumerate(lines) if "error:" in line), 0)
    return "\n".join(lines[first_error : first_error + _COMPILER_LINES])[: 2 * _CLIP] or f"exit code {build.exit_code}"


_dynamic_suites: Memo[tuple[StdioCase, ...]] = Memo()


def _dynamic_suite(config: StdioConfig, task: Task) -> tuple[StdioCase, ...]:
    if not isinstance(task.gold, str) or not task.gold.strip():
        raise GraderError("dynamic tests need the task's gold program (a string of code)")

    def compute() -> tuple[StdioCase, ...]:
        rng = random.Random(f"{config.seed}:{task.id}")
        inputs = mutate_stdin([case.input for case in config.cases], config.dynamic_cases * 2, rng)
        gold, _ = extract_program(task.gold, config.language)
        runs = run_program(config.language, gold, inputs, config.limits(), task.environment)
        if runs.failed_build is not None:
            raise GraderError(f"the gold program does not compile: {_compiler_message(runs.failed_build)}")
        suite = tuple(
            StdioCase(input=text, output=result.stdout)
            for text, result in zip(inputs, runs.runs)
            if result.status == "ok"
        )[: config.dynamic_cases]
        if not suite:
            raise GraderError("no dynamic input could be made: the gold program failed on every mutation")
        return suite

    return _dynamic_suites.get((config.model_dump_json(), task.id, task.gold), compute)


@register_verifier("stdio", StdioConfig)
def check_stdio(config: StdioConfig, task: Task, response: str) -> Verdict:
    """Run the answer's program once per case; reward is the fraction of cases passed."""
    cases: list[tuple[str, StdioCase]] = []
    if config.suite in ("fixed", "both"):
        cases += [("test", case) for case in config.cases]
    if config.suite in ("dynamic", "both"):
        cases += [("extra test", case) for case in _dynamic_suite(config, task)]
    program, fence = extract_program(response, config.language)
    if not program.strip():
        return Verdict(0.0, False, detail="no program in the answer", feedback="Your answer contains no program.")
    if fence is not None and fence != config.language:
        wanted, given = LANGUAGE_NAMES.get(config.language, config.language), LANGUAGE_NAMES.get(fence, fence)
        return Verdict(
            0.0,
            False,
            detail=f"the answer is {given}, not {wanted}",
            feedback=f"The task asks for {wanted}; the answer is {given}.",
        )
    runs = run_program(config.language, program, [case.input for _, case in cases], config.limits(), task.environment)
    if runs.failed_build is not None:
        message = _compiler_message(runs.failed_build)
        return Verdict(
            0.0, False, detail=f"does not compile: {message}", feedback=f"Your program does not compile:\n{message}"
        )
    return _tally(config, cases, runs.runs)


def _tally(config: StdioConfig, cases: list[tuple[str, StdioCase]], results: tuple[ExecResult, ...]) -> Verdict:
    passed, problems = 0, []
    for number, ((label, case), result) in enumerate(zip(cases, results), start=1):
        failure = _run_failure(result)
        if failure is None and outputs_match(result.stdout, case.output, config):
            passed += 1
            continue
        got = f"your program {failure}" if failure else f"your program printed {_clip(result.stdout)}"
        problems.append(f"On {label} {number} (input {_clip(case.input)}) {got}; expected output {_clip(case.output)}.")
    total = len(cases)
    detail = f"{passed}/{total} cases passed"
    if passed == total:
        return Verdict(1.0, True, detail=detail, feedback=f"All {total} tests passed.")
    reward = 0.0 if config.scoring == "all_or_nothing" else passed / total
    feedback = " ".join([f"{total - passed} of {total} tests failed.", *problems[:_SHOWN]])
    return Verdict(reward, False, detail=f"{detail}; first failure: {problems[0]}", feedback=feedback)
