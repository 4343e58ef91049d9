"""A batch of agent episodes: the user's program played against the gateway, each episode's
recorded calls one trajectory, its answer scored by the task's verifier.

Every episode gets its own base URL (``/episodes/ID/v1``); the gateway samples with the run's
temperature and truncation whatever a request asks (the trainer scores the tokens under those),
records each call's exact prompt and sampled ids, and the finished episode becomes the
trajectory (sampled tokens at mask 1, what the gateway inserted between calls at mask 0). An
episode whose program failed, or that never called the model, is an infrastructure failure:
nothing of the policy's is there to judge or train.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Callable, Sequence

from veriloop.core import Response, Score, Task, Trajectory
from veriloop.rollout._agent import AgentHost, AgentProgram, prompt_text, run_agent
from veriloop.rollout._episode import Verify, verify_in_thread
from veriloop.rollout._gateway import Gateway
from veriloop.rollout._gateway_calls import GatewayLimits
from veriloop.rollout._gateway_records import GatewayEpisode, episode_trajectory
from veriloop.rollout._rollout import (
    RolloutBatch,
    episode_seed,
    rank_groups,
    ranked_later,
    ranked_task_indices,
    run_coroutine,
    summarize_rollout,
)

API_KEY = "veriloop-episode"  # what the program's client sends; the gateway answers loopback only


def agent_rollout(
    tasks: Sequence[Task],
    engine,
    program: AgentProgram,
    *,
    group_size: int = 1,
    temperature: float = 1.0,
    top_p: float = 1.0,
    top_k: int = 0,
    max_tokens: int = 256,
    concurrency: int = 64,
    seed: int | None = None,
    first_task_index: int = 0,
    verify: Verify = verify_in_thread,
    progress: Callable[[int, int], None] | None = None,
) -> RolloutBatch:
    """``group_size`` episodes of every task played by ``program`` through a gateway over
    ``engine``; trajectories come back grouped, in task order. ``max_tokens`` caps each call.
    Each episode's calls sample from a seed derived from ``seed`` and the task's index in the
    whole batch (counted from ``first_task_index``), as ``arollout``'s episodes do, unless a call
    names its own."""
    limits = GatewayLimits(
        max_tokens=max_tokens, temperature=temperature, top_p=top_p, top_k=top_k, clamp_max_tokens=True
    )
    with Gateway(engine, limits=limits) as gateway:
        return run_coroutine(
            _episodes(tasks, gateway, program, group_size, concurrency, seed, first_task_index, verify, progress)
        )


async def _episodes(
    tasks: Sequence[Task],
    gateway: Gateway,
    program: AgentProgram,
    group_size: int,
    concurrency: int,
    seed: int | None,
    first_task_index: int,
    verify: Verify,
    progress: Callable[[int, int], None] | None,
) -> RolloutBatch:
    # A function's episodes fork from one warm process for the batch: its module is imported once.
    async with AgentHost(program) if program.callable else contextlib.nullcontext() as host:
        limit = asyncio.Semaphore(concurrency)
        total, done = len(tasks) * group_size, 0
        ranked = ranked_task_indices(tasks, group_size)

        async def one(task_index: int, task: Task, sample_index: int) -> Trajectory:
            nonlocal done
            judge = ranked_later if task_index in ranked else verify
            async with limit:
                group_id = f"{task.id}#{seed if seed is not None else 'x'}"
                this_seed = episode_seed(seed, first_task_index + task_index, sample_index)
                trajectory = await play(task, gateway, program, judge, group_id, sample_index, host, this_seed)
            done += 1
            if progress is not None:
                progress(done, total)
            return trajectory

        started, engine_busy = time.perf_counter(), getattr(gateway.engine, "busy_s", 0.0)
        jobs = (one(i, t, j) for i, t in enumerate(tasks) for j in range(group_size))
        trajectories = tuple(await asyncio.gather(*jobs))
        if ranked:
            trajectories = await asyncio.to_thread(rank_groups, tasks, trajectories, group_size, ranked)
        wall_s = time.perf_counter() - started
        return RolloutBatch(
            trajectories,
            summarize_rollout(trajectories, wall_s, 1, getattr(gateway.engine, "busy_s", 0.0) - engine_busy),
        )


async def play(
    task: Task,
    gateway: Gateway,
    program: AgentProgram,
    verify: Verify,
    group_id: str,
    sample_index: int,
    host: AgentHost | None = None,
    seed: int | None = None,
) -> Trajectory:
    """One episode of ``task``: the program run against its own base URL (its calls sampled from
    ``seed`` when they name none), then scored."""
    episode_id = f"ep-{uuid.uuid4().hex}"
    started = time.perf_counter()
    url = gateway.episode_url(episode_id, seed)
    run = await run_agent(program, prompt_text(task.prompt), url, API_KEY, episode_id, gateway.calls.model_name, host)
    episode: GatewayEpisode = await asyncio.to_thread(gateway.finish, episode_id)
    agent_s = time.perf_counter() - started
    failure = run.failure() or ("" if episode.calls else "the agent program answered without calling the model")
    if failure:
        score = Score(id=episode_id, task_id=task.id, reward=None, status="infra_error", detail=failure)
    else:
        verified = time.perf_counter()
        score = await verify(task, Response(id=episode_id, task_id=task.id, response=run.answer))
        score = score.model_copy(update={"id": episode_id})
        verify_s = time.perf_counter() - verified
    common = {
        "task_id": task.id,
        "domain": task.domain,
        "group_id": group_id,
        "sample_index": sample_index,
        "reward": score.reward,
    }
    if not episode.calls:
        return Trajectory(id=episode_id, response=run.answer, score=score, stop_reason="error", **common)
    trajectory = episode_trajectory(episode, tokenizer=getattr(gateway.engine, "tokenizer", None), **common)
    timings = {"agent_s": round(agent_s, 6)}
    if not failure:
        timings["verify_s"] = round(verify_s, 6)
    return trajectory.model_copy(
        update={
            "response": run.answer,
            "score": score,
            "stop_reason": "error" if failure else "done",
            "timings": timings,
        }
    )
