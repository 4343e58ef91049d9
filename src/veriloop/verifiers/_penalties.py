"""Penalty kinds for combined verifiers: rules that lower a reward (or zero it outright).

A penalty kind is a pydantic config and a plain ``find(config, task, response)`` returning why
the penalty applies, or None. Kinds are registered by name like verifier kinds.

A configured regex is matched against the response in the killable check pool
(``answers/_regex_check.py``), since a backtracking pattern can run for hours on a crafted
response; a search that passes ``REGEX_TIMEOUT_S`` makes the penalty apply (the response made
the search run away, so it gets no benefit of the doubt).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import Field, ValidationError, field_validator, model_validator

from veriloop.core import Registry, Task, UnknownNameError, describe_validation_error
from veriloop.verifiers._registry import VerifierConfig
from veriloop.verifiers._visible_words import visible_tokens, visible_words

P = TypeVar("P", bound="PenaltyConfig")


class PenaltyConfig(VerifierConfig):
    """Fields every penalty has."""

    amount: float = Field(default=0.5, ge=0, description="subtracted from the reward when the penalty applies")
    fatal: bool = Field(default=False, description="when it applies, skip the checks: the reward is the floor")


@dataclass(frozen=True)
class PenaltyKind(Generic[P]):
    name: str
    config: type[P]
    find: Callable[[P, Task, str], str | None]

    def parse_config(self, spec: dict[str, Any]) -> P:
        return self.config.model_validate({k: v for k, v in spec.items() if k != "kind"})


PENALTIES: Registry[PenaltyKind[Any]] = Registry("penalty kind")


def register_penalty(
    name: str, config: type[P]
) -> Callable[[Callable[[P, Task, str], str | None]], Callable[[P, Task, str], str | None]]:
    """Decorator registering ``find(config, task, response) -> reason | None`` under ``name``."""

    def add(find: Callable[[P, Task, str], str | None]) -> Callable[[P, Task, str], str | None]:
        PENALTIES.add(name, PenaltyKind(name=name, config=config, find=find))
        return find

    return add


def parse_penalty(spec: dict[str, Any]) -> tuple[PenaltyKind[Any], PenaltyConfig]:
    """The kind and config of one penalty object; ValueError with a readable message if bad."""
    kind_name = spec.get("kind")
    if not isinstance(kind_name, str):
        raise ValueError("a penalty needs a 'kind' string")
    try:
        kind = PENALTIES.get(kind_name)
    except UnknownNameError as exc:
        raise ValueError(str(exc)) from None
    try:
        return kind, kind.parse_config(spec)
    except ValidationError as exc:
        raise ValueError(f"{kind_name} penalty: {describe_validation_error(exc)}") from None


class TooLongConfig(PenaltyConfig):
    max_chars: int | None = Field(default=None, ge=1, description="most characters allowed")
    max_words: int | None = Field(
        default=None, ge=1, description="most words allowed (letter or digit runs, whatever separates them)"
    )
    max_tokens: int | None = Field(
        default=None, ge=1, description="most tokens allowed, as a BPE tokenizer's pre-tokenizer splits text"
    )

    @model_validator(mode="after")
    def _some_limit(self) -> TooLongConfig:
        if self.max_chars is None and self.max_words is None and self.max_tokens is None:
            raise ValueError("set max_chars, max_words or max_tokens")
        return self


@register_penalty("too_long", TooLongConfig)
def find_too_long(config: TooLongConfig, task: Task, response: str) -> str | None:
    """The response is longer than a limit; words and tokens are counted as ``_visible_words`` says."""
    if config.max_chars is not None and len(response) > config.max_chars:
        return f"the response is {len(response)} characters long; the limit is {config.max_chars}"
    for limit, count, unit in (
        (config.max_words, visible_words, "words"),
        (config.max_tokens, visible_tokens, "tokens"),
    ):
        if limit is not None:
            length = count(response)
            if length > limit:
                return f"the response is {length} {unit} long; the limit is {limit}"
    return None


DEFAULT_FINAL_ANSWER = r"\\boxed[ \t]*\{|<answer>|^[ \t]*#{4}[ \t]*\S|final answer[ \t]*(?:is|:)"


REGEX_TIMEOUT_S = 2.0
REGEX_SEARCH = "veriloop.verifiers.answers._regex_check:search_patterns"


class _RanAway(Exception):
    """A penalty's pattern search passed REGEX_TIMEOUT_S."""


def _search(patterns: tuple[str, ...], flags: int, text: str) -> str | None:
    """The first match of the first matching pattern, or None; raises _RanAway past the time limit."""
    from veriloop.verifiers.answers._check_pool import CheckTimeout, shared_pool

    request = {"patterns": list(patterns), "flags": int(flags), "text": text}
    try:
        return shared_pool(REGEX_SEARCH).call(request, REGEX_TIMEOUT_S)["found"]
    except CheckTimeout:
        raise _RanAway(f"searching it for the penalty's pattern ran past {REGEX_TIMEOUT_S:g} s") from None


def _compiles(pattern: str) -> str:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"not a valid regular expression: {exc}") from None
    return pattern


class NoFinalAnswerConfig(PenaltyConfig):
    pattern: str = Field(
        default=DEFAULT_FINAL_ANSWER,
        description="regex that marks a final answer (default: \\boxed{, <answer> tags, '#### ', 'final answer:')",
    )

    @field_validator("pattern")
    @classmethod
    def _valid(cls, pattern: str) -> str:
        return _compiles(pattern)


@register_penalty("no_final_answer", NoFinalAnswerConfig)
def find_no_final_answer(config: NoFinalAnswerConfig, task: Task, response: str) -> str | None:
    """The response never marks a final answer."""
    try:
        if _search((config.pattern,), re.IGNORECASE | re.MULTILINE | re.DOTALL, response) is not None:
            return None
    except _RanAway as exc:
        return str(exc)
    return "no final answer is marked (e.g. \\boxed{...} or <answer>...</answer>)"


DEFAULT_UNSAFE = (
    r"\bos\.(?:system|popen|exec\w*|spawn\w*|fork|kill|remove|unlink|rmdir)\b",
    r"\bsubprocess\b",
    r"\bshutil\.rmtree\b",
    r"\b(?:ctypes|socket|urllib|requests|httpx)\b",
    r"\bsys\.(?:exit|settrace|setprofile|_getframe|modules)\b",
    r"\b(?:__import__|__builtins__|__subclasses__|__globals__|__code__)\b",
    r"\b(?:exec|eval|compile)\s*\(",
    r"\brm\s+-[a-z]*r[a-z]*f?\b",
    r"(?:^|[^\w/.])/(?:etc|proc|sys|dev|root|home)/",
)


class UnsafePatternConfig(PenaltyConfig):
    amount: float = Field(default=1.0, ge=0, description="subtracted from the reward when the penalty applies")
    patterns: tuple[str, ...] = Field(
        default=DEFAULT_UNSAFE,
        min_length=1,
        description="regexes that must not occur (default: process, file-system, network and introspection calls)",
    )
    ignore_case: bool = Field(default=False, description="match the patterns without regard to case")

    @field_validator("patterns")
    @classmethod
    def _all_compile(cls, patterns: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(_compiles(p) for p in patterns)


@register_penalty("unsafe_pattern", UnsafePatternConfig)
def find_unsafe_pattern(config: UnsafePatternConfig, task: Task, response: str) -> str | None:
    """The response contains a forbidden pattern.

    A screen of the text only: trivial rewrites (``from os import system``, names built by string
    concatenation) dodge it. ``unsafe_behaviour`` judges what the code did when it ran.
    """
    flags = re.IGNORECASE | re.MULTILINE if config.ignore_case else re.MULTILINE
    try:
        found = _search(config.patterns, flags, response)
    except _RanAway as exc:
        return str(exc)
    if found is not None:
        return f"it contains {found!r}, which is not allowed"
    return None


class UnsafeBehaviourConfig(PenaltyConfig):
    amount: float = Field(default=1.0, ge=0, description="subtracted from the reward when the penalty applies")
    entry_point: str | None = Field(
        default=None, description="function to call (default: the entry_point of the task's code check, if any)"
    )
    arguments: list[list[Any]] | None = Field(
        default=None,
        description="argument lists to call it with (default: the inputs of the task's code check; none: only define it)",
    )
    timeout_s: float = Field(default=10.0, gt=0, le=600, description="wall-clock limit of the audited run")
    memory_mb: int = Field(default=512, ge=16, description="memory limit of the audited run")


def _code_check(spec: Any) -> dict[str, Any]:
    """The first object in a task's verifier that names an ``entry_point`` (a code check), or {}."""
    if isinstance(spec, dict):
        if isinstance(spec.get("entry_point"), str):
            return spec
        spec = list(spec.values())
    if isinstance(spec, list):
        for item in spec:
            found = _code_check(item)
            if found:
                return found
    return {}


@register_penalty("unsafe_behaviour", UnsafeBehaviourConfig)
def find_unsafe_behaviour(config: UnsafeBehaviourConfig, task: Task, response: str) -> str | None:
    """The response's code, run in the sandbox under an audit hook, did something forbidden:
    created a process, used ctypes, reached for frames, opened files outside its directory,
    opened sockets, ... (see ``code/sandboxed/_audit_hook.py``), however it spelt it.

    This is a run of its own, apart from the graded one, so code that behaves otherwise there
    (it tells the runs apart, or acts only on some inputs) dodges it. A ``python_tests`` check
    judges its graded run itself with its ``unsafe_behaviour_penalty`` field: prefer that."""
    from veriloop.verifiers.code._audited_run import audited_run, describe_findings
    from veriloop.verifiers.code._code_sandbox import CodeLimits
    from veriloop.verifiers.code._extract import candidate_program

    check = _code_check(task.verifier)
    entry_point = config.entry_point or check.get("entry_point") or ""
    arguments = config.arguments if config.arguments is not None else check.get("inputs") or []
    program = candidate_program(response, str(check.get("prompt_code", "")), entry_point or None)
    report = audited_run(program, entry_point, arguments, CodeLimits(config.timeout_s, config.memory_mb))
    return describe_findings(report.findings) if report.findings else None
