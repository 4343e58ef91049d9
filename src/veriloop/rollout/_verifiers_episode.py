"""Episodes on multi-turn verifiers environments: the environment answers each model turn.

A ``verifiers_taskset`` task marked ``multi_turn`` comes from a ``load_environment`` package
whose environment is a ``MultiTurnEnv``. After each model turn, the turns so far go to the
environment in the sandbox, which replays its rollout (``veriloop.verifiers.step_taskset``) and
gives its next message, or says the rollout has ended (``is_completed``, or its
``max_turns``) with its rubric's reward. Its message is shown to the model as a tool message
(token-level engines render it with the chat template, loss mask 0, as tool output is).
Replaying each turn's history keeps nothing of the episode in the sandbox between turns; so the
environment must answer the same turns the same way, as its offline scoring assumes too. When
the episode's own limits (turns, tokens, context) end it first, the rubric scores the turns
there are. An environment that fails makes the score an ``infra_error``.
"""

from __future__ import annotations

import asyncio

from veriloop.core import Response, Score, Task, Trajectory
from veriloop.rollout._engine import Engine
from veriloop.rollout._episode import (
    EPISODE_DRIVERS,
    EpisodeConfig,
    _show_observation,
    _start,
    _trajectory,
)
from veriloop.rollout._openenv_episode import _infra_error, next_model_turn, verdict_score


def _applies(task: Task) -> bool:
    return bool(task.verifier.get("multi_turn"))


@EPISODE_DRIVERS.register("verifiers_taskset")
async def run_verifiers_episode(
    task: Task, engine: Engine, config: EpisodeConfig, *, seed: int | None, group_id: str | None, sample_index: int
) -> Trajectory:
    """One episode of a multi-turn ``task`` on its verifiers environment (see the module docstring)."""
    from veriloop.verifiers import GraderError, step_taskset, verify

    state = _start(task, engine, config)

    def ended(score: Score, text: str, reason: str) -> Trajectory:
        return _trajectory(task, engine, state, score, text, reason, group_id, sample_index)

    turns: list[str] = []
    text, stop_reason = "", "max_turns"
    for turn_index in range(config.stop.max_turns):
        turn, reason, failure = await next_model_turn(task, engine, state, config, seed, turn_index)
        if turn is None:
            stop_reason = reason
            break
        text = turn
        if failure is not None:
            return ended(failure, text, reason)
        turns.append(text)
        try:
            step = await asyncio.to_thread(step_taskset, task, turns)
        except GraderError as exc:
            return ended(_infra_error(task, str(exc)), text, "error")
        if step.done:
            assert step.verdict is not None
            return ended(verdict_score(task, step.verdict), text, "done")
        if turn_index == config.stop.max_turns - 1:
            break
        if not _show_observation(task, engine, state, config, step.observation):
            stop_reason = "context_budget"
            break
    response = Response(id=task.id, task_id=task.id, response=text, turns=tuple(turns))
    return ended(await asyncio.to_thread(verify, task, response), text, stop_reason)


run_verifiers_episode.applies = _applies  # type: ignore[attr-defined]
