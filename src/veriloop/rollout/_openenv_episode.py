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

from veriloop.core import Message, Score, Task, Trajectory, Turn
from veriloop.rollout._episode import (
    EPISODE_DRIVERS,
    EpisodeConfig,
    _add_observation,
    _assistant_text,
    _fit_observation,
    _generate,
    _start,
    _trajectory,
    _turn_budget,
)
from veriloop.rollout._engine import Engine
from veriloop.rollout._sampling import Sample, SamplingParams


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


async def _model_turn(engine: Engine, state: Any, config: EpisodeConfig, budget: int, seed: int | None) -> Sample:
    """Sample one model turn of at most ``budget`` tokens and add it to the episode."""
    if engine.tokenizer is not None:
        state.context_tokens.append(len(state.context))
    params = SamplingParams(
        temperature=config.temperature,
        top_p=config.top_p,
        top_k=config.top_k,
        max_tokens=budget,
        seed=seed,
        repetition_stop=config.stop.repetition_repeats,
    )
    sample = await _generate(engine, state, params)
    text = _assistant_text(engine, sample)
    versions = sample.versions or (engine.policy_version,) * len(sample.token_ids)
    state.context.add_generated(sample.token_ids, sample.logprobs, versions)
    state.messages.append({"role": "assistant", "content": text})
    logprobs = sample.logprobs if len(sample.logprobs) == len(sample.token_ids) else ()
    state.turns.append(
        Turn(
            role="assistant",
            text=text,
            token_ids=sample.token_ids,
            logprobs=logprobs,
            generated_tokens=sample.num_tokens,
        )
    )
    return sample


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
    sample = await _model_turn(engine, state, config, budget, None if seed is None else seed + 1000 * turn_index)
    text = state.turns[-1].text
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
        shown = observed[: config.max_observation_chars]
        fitted = _fit_observation(engine, state, config, shown, config.max_tokens_for(task.domain))
        if fitted is None:
            stop_reason = "context_budget"
            break
        _add_observation(engine, state, *fitted)
    return ended(state, verdict_score(task, episode_verdict(env, record)), text, stop_reason)
