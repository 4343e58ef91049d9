"""Episodes on OpenEnv environments: the environment, not a tool executor, answers each turn.

For a task whose verifier kind is ``openenv`` (``veriloop.verifiers.OpenEnvConfig``), the episode
opens a session on the environment's server (for a task that names the environment's app, a
server of its own started in the sandbox, ended with the episode) and resets it; the reset's observation closes the
prompt as a user message. Each model turn is sent as one action, and what the environment
observes comes back as a tool message (token-level engines render it with the chat template,
loss mask 0, as tool output is). The episode ends when the environment says ``done``, after the
config's ``max_steps`` steps, or at the episode's own limits (turns, tokens, context); its score
is the environment's reward (``episode_verdict``). The verifier is not called: the reward was
given live. A server that cannot be reached or fails mid-episode makes the score an
``infra_error``.
"""

from __future__ import annotations

import asyncio
from contextlib import ExitStack
from typing import Any

from veriloop.core import Message, Score, Task, Trajectory
from veriloop.rollout._episode import (
    EPISODE_DRIVERS,
    EpisodeConfig,
    _show_observation,
    _model_turn,
    _start,
    _trajectory,
    _turn_budget,
)
from veriloop.rollout._engine import Engine


def _infra_error(task: Task, detail: str) -> Score:
    return Score(id=task.id, task_id=task.id, reward=None, passed=False, status="infra_error", detail=detail)


def _with_first_observation(task: Task, text: str) -> Task:
    """``task`` whose prompt ends with the reset's observation, as a user message."""
    messages = [Message(**m) for m in task.messages()]
    return task.model_copy(update={"prompt": [*messages, Message(role="user", content=text)]})


@EPISODE_DRIVERS.register("openenv")
async def run_openenv_episode(
    task: Task, engine: Engine, config: EpisodeConfig, *, seed: int | None, group_id: str | None, sample_index: int
) -> Trajectory:
    """One episode of ``task`` on its OpenEnv environment (see the module docstring)."""
    from veriloop.verifiers import VERIFIERS, OpenEnvError, environment_session

    env = VERIFIERS.get("openenv").parse_config(task.verifier)
    # Entered and left in worker threads: an app's server starts in one, which outlives the episode.
    opened = ExitStack()
    try:
        session = await asyncio.to_thread(opened.enter_context, environment_session(env))
    except OpenEnvError as exc:
        state = _start(task, engine, config)
        return _trajectory(task, engine, state, _infra_error(task, str(exc)), "", "error", group_id, sample_index)
    try:
        return await _run_on_session(task, engine, config, env, session, seed, group_id, sample_index)
    finally:
        await asyncio.to_thread(opened.close)


def verdict_score(task: Task, verdict: Any) -> Score:
    """The episode's score of an environment's ``Verdict``."""
    return Score(
        id=task.id,
        task_id=task.id,
        reward=verdict.reward,
        passed=verdict.passed,
        detail=verdict.detail,
        feedback=verdict.feedback,
        environment=verdict.environment,
    )


async def next_model_turn(
    task: Task, engine: Engine, state: Any, config: EpisodeConfig, seed: int | None, turn_index: int
) -> tuple[str | None, str, Score | None]:
    """The next model turn of a driven episode: ``(its text, "", None)``; ``(None, the stop
    reason, None)`` when the episode's budget leaves no room for one; or ``(its text, "error", an
    infra_error score)`` when generation failed (the engine broke, not the model)."""
    budget, short_reason = _turn_budget(task, engine, state, config)
    if budget <= 0:
        return None, short_reason, None
    sample, text = await _model_turn(engine, state, config, budget, None if seed is None else seed + 1000 * turn_index)
    if sample.finish_reason == "error":
        detail = f"generation failed: {sample.error or 'the engine returned an error'}"
        return text, "error", _infra_error(task, detail)
    return text, "", None


async def _run_on_session(
    task: Task,
    engine: Engine,
    config: EpisodeConfig,
    env: Any,
    session: Any,
    seed: int | None,
    group_id: str | None,
    sample_index: int,
) -> Trajectory:
    from veriloop.verifiers import EpisodeRecord, OpenEnvError, episode_verdict, observation_text, take_step

    def ended(state: Any, score: Score, text: str, reason: str) -> Trajectory:
        return _trajectory(task, engine, state, score, text, reason, group_id, sample_index)

    try:
        start = await asyncio.to_thread(session.reset, **env.reset)
    except OpenEnvError as exc:
        return ended(_start(task, engine, config), _infra_error(task, str(exc)), "", "error")
    state = _start(_with_first_observation(task, observation_text(env, start)), engine, config)
    record, stop_reason, text = EpisodeRecord(done=start.done), "max_turns", ""
    for turn_index in range(config.stop.max_turns):
        if record.done or record.steps >= env.max_steps:
            stop_reason = "done"
            break
        turn, reason, failure = await next_model_turn(task, engine, state, config, seed, turn_index)
        if turn is None:
            stop_reason = reason
            break
        text = turn
        if failure is not None:
            return ended(state, failure, text, reason)
        try:
            observed = await asyncio.to_thread(take_step, session, env, text, record)
        except OpenEnvError as exc:
            return ended(state, _infra_error(task, str(exc)), text, "error")
        if record.done or turn_index == config.stop.max_turns - 1:
            stop_reason = "done" if record.done else stop_reason
            break
        if not _show_observation(task, engine, state, config, observed):
            stop_reason = "context_budget"
            break
    return ended(state, verdict_score(task, episode_verdict(env, record)), text, stop_reason)
