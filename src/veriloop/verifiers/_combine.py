"""Layered verifiers: ``all_of`` and ``weighted`` combinations of checks, with penalties.

Each entry of ``checks`` is ``{"verifier": {"kind": ..., ...}, "weight": 1.0, "gold": ...,
"label": ...}``; ``gold`` replaces the task's gold for that check only. Sub-verifiers and
penalties are validated with the task, so ``tasks validate`` reports a typo inside them.

* ``all_of``: passed when every check passes; reward is the smallest check reward (or their
  product). With ``short_circuit`` it stops at the first check that scores 0, since later
  checks cannot raise the reward (useful to skip slow tests when a format rule fails).
* ``weighted``: reward is the weighted mean of the check rewards; passed when every check
  passes (or when the reward reaches ``pass_threshold``).

Penalties (``too_long``, ``no_final_answer``, ``unsafe_pattern``, ...) are checked first. A
fatal one sets the reward to ``floor`` without running the checks; the others subtract their
``amount`` from the combined reward, which never goes below ``floor``. Any penalty means
not passed. A check whose grader fails makes the whole score an infra_error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator

from veriloop.core import Task, UnknownNameError, describe_validation_error
from veriloop.verifiers._penalties import parse_penalty
from veriloop.verifiers._registry import (
    VERIFIERS,
    GraderError,
    Verdict,
    VerifierConfig,
    register_task_check,
    register_verifier,
    task_problem,
)


class CheckSpec(VerifierConfig):
    verifier: dict[str, Any] = Field(description="a verifier object: {'kind': ..., ...fields of that kind}")
    weight: float = Field(default=1.0, ge=0, description="weight in a 'weighted' combination")
    gold: Any = Field(default=None, description="gold answer for this check only (default: the task's)")
    label: str | None = Field(default=None, description="name shown in detail and feedback")


class CombinationConfig(VerifierConfig):
    checks: list[CheckSpec] = Field(min_length=1, description="the checks to combine")
    penalties: list[dict[str, Any]] = Field(default_factory=list, description="penalty objects: {'kind': ..., ...}")
    floor: float = Field(default=0.0, le=0, description="lowest reward after penalties")

    @model_validator(mode="after")
    def _parts_are_valid(self) -> CombinationConfig:
        for index, spec in enumerate(self.checks):
            kind_name = spec.verifier.get("kind")
            if not isinstance(kind_name, str):
                raise ValueError(f"checks[{index}].verifier needs a 'kind' string")
            try:
                VERIFIERS.get(kind_name).parse_config(spec.verifier)
            except UnknownNameError as exc:
                raise ValueError(f"checks[{index}]: {exc}") from None
            except ValidationError as exc:
                raise ValueError(f"checks[{index}]: {kind_name}: {describe_validation_error(exc)}") from None
        for index, penalty in enumerate(self.penalties):
            try:
                parse_penalty(penalty)
            except ValueError as exc:
                raise ValueError(f"penalties[{index}]: {exc}") from None
        return self


class AllOfConfig(CombinationConfig):
    aggregate: Literal["min", "product"] = Field(default="min", description="how check rewards combine")
    short_circuit: bool = Field(default=True, description="stop at the first check that scores 0")


class WeightedConfig(CombinationConfig):
    pass_threshold: float | None = Field(
        default=None, gt=0, le=1, description="reward that counts as passed (default: every check passes)"
    )

    @model_validator(mode="after")
    def _some_weight(self) -> WeightedConfig:
        if sum(spec.weight for spec in self.checks) <= 0:
            raise ValueError("the check weights add up to 0")
        return self


def _check_task(spec: CheckSpec, task: Task) -> Task:
    """The task as check ``spec`` sees it: with the check's own gold when it has one."""
    return task if spec.gold is None else task.model_copy(update={"gold": spec.gold})


def checks_task_problem(config: CombinationConfig, task: Task) -> str | None:
    """The first problem a check's kind finds with the task (its registered task check)."""
    for index, spec in enumerate(config.checks):
        kind = VERIFIERS.get(spec.verifier["kind"])
        problem = task_problem(kind, kind.parse_config(spec.verifier), _check_task(spec, task))
        if problem is not None:
            return f"checks[{index}]: {kind.name}: {problem}"
    return None


@dataclass(frozen=True)
class _Ran:
    label: str
    weight: float
    verdict: Verdict


def _run_check(index: int, spec: CheckSpec, task: Task, response: str) -> _Ran:
    kind = VERIFIERS.get(spec.verifier["kind"])
    label = spec.label or f"{kind.name}#{index + 1}"
    try:
        verdict = kind.check(kind.parse_config(spec.verifier), _check_task(spec, task), response)
    except Exception as exc:
        raise GraderError(f"check {label}: {type(exc).__name__}: {exc}") from exc
    return _Ran(label, spec.weight, verdict)


def _penalties(config: CombinationConfig, task: Task, response: str) -> list[tuple[str, float, bool]]:
    """``(reason, amount, fatal)`` for each penalty that applies."""
    found = []
    for spec in config.penalties:
        kind, penalty = parse_penalty(spec)
        reason = kind.find(penalty, task, response)
        if reason is not None:
            found.append((f"{kind.name}: {reason}", penalty.amount, penalty.fatal))
    return found


def _combine(config: CombinationConfig, task: Task, response: str, reward_of, stop_at_zero: bool, passed_of) -> Verdict:
    penalties = _penalties(config, task, response)
    penalty_text = "; ".join(reason for reason, _, _ in penalties)
    if any(fatal for _, _, fatal in penalties):
        return Verdict(
            config.floor,
            False,
            detail=f"penalised, checks skipped: {penalty_text}",
            feedback=f"Penalised: {penalty_text}.",
        )
    ran: list[_Ran] = []
    for index, spec in enumerate(config.checks):
        ran.append(_run_check(index, spec, task, response))
        if stop_at_zero and ran[-1].verdict.reward <= 0 and not ran[-1].verdict.passed:
            break
    skipped = len(config.checks) - len(ran)
    reward = reward_of(ran) if not skipped else 0.0
    reward = max(config.floor, reward - sum(amount for _, amount, _ in penalties))
    passed = not skipped and not penalties and passed_of(ran, reward)
    details = [f"{r.label}: {r.verdict.reward:g} ({r.verdict.detail})" for r in ran]
    if skipped:
        details.append(f"{skipped} later check(s) skipped")
    if penalties:
        details.append(f"penalties: {penalty_text}")
    failing = [r.verdict.feedback for r in ran if not r.verdict.passed and r.verdict.feedback]
    if penalties:
        failing.append(f"Penalised: {penalty_text}.")
    feedback = " ".join(failing) if not passed else "Correct."
    return Verdict(reward, passed, detail="; ".join(details), feedback=feedback)


@register_verifier("all_of", AllOfConfig)
def check_all_of(config: AllOfConfig, task: Task, response: str) -> Verdict:
    """Passed when every check passes; reward is the smallest check reward (or the product)."""

    def reward_of(ran: list[_Ran]) -> float:
        rewards = [r.verdict.reward for r in ran]
        if config.aggregate == "min":
            return min(rewards)
        product = 1.0
        for value in rewards:
            product *= value
        return product

    return _combine(
        config, task, response, reward_of, config.short_circuit, lambda ran, reward: all(r.verdict.passed for r in ran)
    )


@register_verifier("weighted", WeightedConfig)
def check_weighted(config: WeightedConfig, task: Task, response: str) -> Verdict:
    """Reward is the weighted mean of the check rewards."""

    def reward_of(ran: list[_Ran]) -> float:
        return sum(r.weight * r.verdict.reward for r in ran) / sum(r.weight for r in ran)

    def passed_of(ran: list[_Ran], reward: float) -> bool:
        if config.pass_threshold is not None:
            return reward >= config.pass_threshold
        return all(r.verdict.passed for r in ran)

    return _combine(config, task, response, reward_of, False, passed_of)


register_task_check("all_of")(checks_task_problem)
register_task_check("weighted")(checks_task_problem)
