"""The ``verifiers_taskset`` kind: a response scored by a verifiers taskset's own rewards.

PrimeIntellect's ``verifiers`` (0.4: ``verifiers.v1``) defines an environment's data as a
``Taskset`` whose ``Task`` objects carry the row (``TaskData``) and score a finished trace with
their ``@vf.reward`` methods (weighted; the trace's reward is the weighted sum). The package and
its requirements cannot share veriloop's process, so everything that touches them runs inside
the sandbox, on the task's environment (built with ``veriloop env build NAME --packages
verifiers==0.4.0 TASKSET_PACKAGE``), through ``in_environment/_taskset_runner.py``: the task is
rebuilt from its data, the model's turns become the trace's assistant messages after the task's
own prompt, and the task's ``score`` runs on it, without network and with nothing kept between
checks. Model text is never evaluated in the host.

A package that exposes ``load_environment`` instead (verifiers before 0.4, the API of most
published environments) is scored by its environment's ``rubric.score_rollout`` on the task's
prompt and the model's turns as the completion (see the runner's docstring). When that
environment answers each turn (a ``MultiTurnEnv``: ``multi_turn`` tasks), the completion is the
rollout replayed with its answers, and ``step_taskset`` gives an episode the environment's
answer to each turn (``veriloop.rollout``).

Supported: rewards and metrics that read the task's data and the trace's messages (the
``last_reply``, ``assistant_messages``, ...). A multi-turn response is scored as the model's
turns in order (its observations are not part of the response record, so rewards that read tool
messages see none). Not supported: rewards that need a runtime (a container of the agent's
files) are skipped, and a task all of whose rewards need one, or that has judges (a judge model
over the network), cannot be scored: an infra error that says so. An exception in the
taskset's code is an infra error too, never a reward of 0.

The program's answers travel on a channel of their own, marked with a key made afresh for each
check (see the runner): a reward that runs the response's program in the scoring process (a
naive code environment) cannot pass off what that program prints as the verdict. A response
whose program ends that process while the rewards run scores 0; a time or memory limit hit
stays an infra error, since the taskset's own cost may be to blame. Code in the scoring process
can still read that process's memory, the key included: a taskset that runs untrusted code
should run it in a process of its own.
"""

from __future__ import annotations

import json
import math
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field

from veriloop.core import Task, UserError
from veriloop.verifiers._registry import (
    VERIFIERS,
    Answer,
    GraderError,
    Verdict,
    VerifierConfig,
    register_verifier,
)

RUNNER_SOURCE = (Path(__file__).parent / "in_environment" / "_taskset_runner.py").read_text(encoding="utf-8")


class VerifiersTasksetConfig(VerifierConfig):
    taskset: str = Field(min_length=1, description="the taskset's id: its installed package, e.g. 'veriloop_sums'")
    args: dict[str, Any] = Field(default_factory=dict, description="fields of the taskset's config")
    data: dict[str, Any] = Field(description="the task's data (its TaskData as JSON)")
    pass_reward: float = Field(default=1.0, description="the reward at or above which the response passed")
    timeout_s: float = Field(default=60.0, gt=0, le=600, description="wall-clock limit of one check")
    memory_mb: int = Field(default=4096, ge=256, description="memory limit of the check's process")
    multi_turn: bool = Field(
        default=False,
        description="the environment answers each model turn (a load_environment MultiTurnEnv): "
        "episodes run through it, and a response is scored on its replayed rollout",
    )


class TasksetRunFailed(Exception):
    """The taskset's program did not answer (its message holds the end of its output)."""


class ScoringEnded(Exception):
    """The taskset's program ended while its rewards ran on the response, with no answer and no
    exception of the taskset's: ended by code those rewards ran (the response's program)."""


def _keyed_answers(stdout: str, key: str) -> dict[str, Any]:
    """The runner's answers on ``stdout`` (the lines that start with ``key``), by kind."""
    answers: dict[str, Any] = {}
    for line in stdout.splitlines():
        head, _, rest = line.partition(" ")
        kind, _, value = rest.partition(" ")
        if head == key and kind in ("scoring", "answer", "error"):
            try:
                answers[kind] = json.loads(value)
            except ValueError:
                raise TasksetRunFailed(f"the taskset's program answered {line[:200]!r}") from None
    return answers


def run_taskset_program(
    environment: str, settings: dict[str, Any], timeout_s: float, memory_mb: int
) -> tuple[dict[str, Any], str | None]:
    """What ``_taskset_runner.py`` answers for ``settings``, run in the sandbox on
    ``environment``, and the environment's hash. TasksetRunFailed when it fails, ScoringEnded
    when it ended cleanly while the rewards ran (UserError: no such environment). Only lines
    that bear this run's fresh key are answers (see the runner's docstring)."""
    from veriloop.sandbox import Limits
    from veriloop.verifiers.code._code_sandbox import environment_sandbox, sandbox_lost

    key = secrets.token_hex(16)
    keyed = {**settings, "key": key}
    program = RUNNER_SOURCE.replace("SETTINGS = {}", f"SETTINGS = json.loads({json.dumps(keyed)!r})", 1)
    limits = Limits(timeout_s=timeout_s, memory_mb=memory_mb, max_processes=64, output_bytes=16 << 20)
    sandbox = environment_sandbox(environment)
    result = sandbox.run_python(program, limits=limits)
    if sandbox_lost(result):
        result = sandbox.run_python(program, limits=limits)
    answers = _keyed_answers(result.stdout, key)
    if isinstance(answers.get("answer"), dict):
        return answers["answer"], result.environment
    if "answer" in answers:
        raise TasksetRunFailed(f"the taskset's program answered {answers['answer']!r:.200}")
    if "error" in answers:
        raise TasksetRunFailed(f"the taskset's code raised: {str(answers['error']).strip()[-800:]}")
    tail = (result.stderr.strip() or result.stdout.strip())[-800:]
    if "scoring" in answers and result.status in ("ok", "error") and result.exit_code is not None:
        raise ScoringEnded(f"the scoring process exited with status {result.exit_code} while the rewards ran")
    raise TasksetRunFailed(f"the taskset's program ended ({result.status}, exit {result.exit_code}): {tail}")


def export_taskset(
    environment: str,
    taskset: str,
    args: dict[str, Any],
    skip: int,
    size: int,
    split: str = "auto",
    timeout_s: float = 300.0,
) -> list[dict[str, Any]]:
    """The taskset's tasks ``skip`` to ``skip + size``: ``{type, key, data, messages}`` each
    (see ``_taskset_runner.py``; ``split`` picks a ``load_environment`` package's dataset);
    UserError when the environment or the taskset fails."""
    settings = {"mode": "export", "taskset": taskset, "args": args, "skip": skip, "size": size, "split": split}
    settings["turns"] = []
    try:
        rows = run_taskset_program(environment, settings, timeout_s, 4096)[0].get("rows")
    except TasksetRunFailed as exc:
        raise UserError(f"verifiers taskset {taskset!r} on environment {environment!r}: {exc}") from None
    if not isinstance(rows, list):
        raise UserError(f"verifiers taskset {taskset!r}: the program answered no rows")
    return rows


def _reward_detail(answer: dict[str, Any]) -> str:
    rewards = answer.get("rewards") or {}
    parts = [
        f"{name} {value['score']:g}x{value['weight']:g}" if isinstance(value, dict) else f"{name} not run"
        for name, value in rewards.items()
    ]
    if not parts:  # a load_environment rubric reports its reward functions as metrics
        parts = [f"{name} {value:g}" for name, value in (answer.get("metrics") or {}).items() if _number(value)]
    skipped = answer.get("skipped") or []
    note = f"; skipped (they need a runtime): {', '.join(skipped)}" if skipped else ""
    return ", ".join(parts) + note


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _run(config: VerifiersTasksetConfig, task: Task, turns: Sequence[str], mode: str) -> Verdict | dict[str, Any]:
    """The runner's answer for ``turns`` in ``mode``, and the environment's hash under
    ``"environment"``; a Verdict of 0 when the response's program ended the scoring process."""
    if task.environment is None:
        raise GraderError("a verifiers taskset runs on an environment: give the task an 'environment'")
    settings = {
        "mode": mode,
        "taskset": config.taskset,
        "args": config.args,
        "data": config.data,
        "turns": list(turns),
        "skip": 0,
        "size": 0,
    }
    try:
        answer, environment = run_taskset_program(task.environment, settings, config.timeout_s, config.memory_mb)
    except TasksetRunFailed as exc:
        raise GraderError(str(exc)) from None
    except ScoringEnded as exc:
        return Verdict(
            0.0,
            False,
            detail=f"{config.taskset}: {exc}: code the rewards ran from the response ended it",
            feedback="Your answer ended the process that scored it.",
        )
    if "unsupported" in answer:
        raise GraderError(f"{config.taskset}: cannot be scored here: {answer['unsupported']}")
    return {**answer, "environment": environment}


def _verdict(config: VerifiersTasksetConfig, answer: dict[str, Any]) -> Verdict:
    reward = answer.get("reward")
    if isinstance(reward, bool) or not isinstance(reward, (int, float)) or not math.isfinite(reward):
        raise GraderError(f"{config.taskset}: the task's score is not a number ({reward!r})")
    passed = reward >= config.pass_reward
    return Verdict(
        float(reward),
        passed,
        detail=f"{config.taskset}: reward {reward:g} ({_reward_detail(answer)})",
        feedback="Correct." if passed else f"Your answer scored {reward:g}.",
        environment=answer.get("environment"),
    )


@dataclass(frozen=True)
class TasksetStep:
    """A multi-turn environment's answer to the model's turns so far: what it shows the model
    next, or, once its rollout has ended (``done``), the verdict."""

    done: bool
    observation: str = ""
    verdict: Verdict | None = None


def step_taskset(task: Task, turns: Sequence[str]) -> TasksetStep:
    """The environment's answer to ``turns`` (the model's turns so far, in order) for a
    ``multi_turn`` task: its rollout replayed in the sandbox (see the runner). GraderError when
    the environment fails."""
    config = VERIFIERS.get("verifiers_taskset").parse_config(task.verifier)
    answer = _run(config, task, turns, "step")
    if isinstance(answer, Verdict):
        return TasksetStep(True, verdict=answer)
    if not answer.get("done"):
        return TasksetStep(False, observation=str(answer.get("observation") or ""))
    return TasksetStep(True, verdict=_verdict(config, answer))


@register_verifier("verifiers_taskset", VerifiersTasksetConfig)
def check_verifiers_taskset(config: VerifiersTasksetConfig, task: Task, response: str) -> Verdict:
    """The weighted sum of the task's rewards on the response (see the module docstring)."""
    turns = list(response.turns) if isinstance(response, Answer) and response.turns else [str(response)]
    answer = _run(config, task, turns, "score")
    return answer if isinstance(answer, Verdict) else _verdict(config, answer)
