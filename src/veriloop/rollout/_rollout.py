"""Rolling out a batch of tasks: many samples per task, episodes run concurrently.

Episodes are coroutines bounded by ``concurrency``. Token-level engines gather concurrent
generation requests into shared batches; while one batch generates, the tool calls and code
verifications of other episodes run on in their sandbox processes.

A task judged by ranking (a ``judge`` verifier in ``rank`` mode, as RULER does) is scored once
its group's episodes have all ended: the group's answers go to the judge side by side
(``verify_many`` keeps a task's answers in one request), so each reward is relative to the
others. Its episodes skip their own verification (unless ``feedback_on_fail`` needs a verdict
mid-episode; the group's ranking then still replaces it). Batches split over workers keep each
task's group whole, so every group is ranked where it was sampled.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from veriloop.core import Response, Score, Task, Trajectory
from veriloop.rollout._engine import Engine
from veriloop.rollout._episode import EpisodeConfig, ToolExecutor, Verify, run_episode, verify_in_thread
from veriloop.rollout._stopping import StopPredicate

T = TypeVar("T")


@dataclass(frozen=True)
class RolloutMetrics:
    """Per-batch figures. Busy fractions are summed over episodes, divided by wall time."""

    episodes: int
    wall_s: float
    generated_tokens: int
    rollout_tokens_per_s: float
    generate_busy_s: float
    engine_busy_s: float  # wall time the engine spent in forward passes (0 when it does not say)
    tools_busy_s: float
    verify_busy_s: float
    sandbox_busy_fraction: float
    mean_reward: float | None
    pass_rate: float
    infra_errors: int
    stop_reasons: dict[str, int]
    context_tokens_mean: float = 0.0  # over every model turn: tokens in its context at its start
    context_tokens_max: int = 0
    truncations_per_episode: float = 0.0  # observations cut to fit the context budget
    drops_per_episode: float = 0.0  # older observations dropped to fit the context budget


@dataclass(frozen=True)
class RolloutBatch:
    trajectories: tuple[Trajectory, ...]
    metrics: RolloutMetrics


async def arollout(
    tasks: Sequence[Task],
    engine: Engine,
    config: EpisodeConfig,
    *,
    group_size: int = 1,
    concurrency: int = 64,
    seed: int | None = None,
    tools: ToolExecutor | None = None,
    verify: Verify = verify_in_thread,
    predicate: StopPredicate | None = None,
    sandbox_workers: int = 1,
    first_task_index: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> RolloutBatch:
    """``group_size`` episodes of every task; trajectories come back grouped, in task order.

    Episode seeds derive from ``seed`` and each task's index in the whole batch, counted from
    ``first_task_index``: a batch split into shards (``tasks[a:b]`` with ``first_task_index=a``)
    samples exactly what the whole batch would. ``progress(done, total)`` is called as each
    episode ends.
    """
    limit = asyncio.Semaphore(concurrency)

    total, done = len(tasks) * group_size, 0
    ranked = ranked_task_indices(tasks, group_size)
    defer = not config.feedback_on_fail

    async def one(task_index: int, task: Task, sample_index: int) -> Trajectory:
        nonlocal done
        this_seed = episode_seed(seed, first_task_index + task_index, sample_index)
        async with limit:
            trajectory = await run_episode(
                task,
                engine,
                config,
                ranked_later if defer and task_index in ranked else verify,
                tools,
                seed=this_seed,
                group_id=f"{task.id}#{seed if seed is not None else 'x'}",
                sample_index=sample_index,
                predicate=predicate,
            )
        done += 1
        if progress is not None:
            progress(done, total)
        return trajectory

    started, engine_busy = time.perf_counter(), getattr(engine, "busy_s", 0.0)
    jobs = [one(i, task, j) for i, task in enumerate(tasks) for j in range(group_size)]
    trajectories = tuple(await asyncio.gather(*jobs))
    if ranked:
        trajectories = await asyncio.to_thread(rank_groups, tasks, trajectories, group_size, ranked)
    wall_s = time.perf_counter() - started
    return RolloutBatch(
        trajectories,
        summarize_rollout(trajectories, wall_s, sandbox_workers, getattr(engine, "busy_s", 0.0) - engine_busy),
    )


def episode_seed(seed: int | None, task_index: int, sample_index: int) -> int | None:
    """The seed of sample ``sample_index`` of the batch's task ``task_index`` (None: unseeded)."""
    return None if seed is None else seed + 7919 * task_index + 104729 * sample_index


RANKED_LATER = "ranked with its group once the group's episodes end"


def ranked_task_indices(tasks: Sequence[Task], group_size: int) -> set[int]:
    """The tasks whose rewards come from ranking their group's answers (groups of two or more)."""
    if group_size < 2:
        return set()
    from veriloop.verifiers import ranks_groups

    return {index for index, task in enumerate(tasks) if ranks_groups(task)}


async def ranked_later(task: Task, response: Response) -> Score:
    """An episode's placeholder verdict, replaced by its group's ranking (``rank_groups``)."""
    return Score(id=task.id, task_id=task.id, reward=0.0, passed=False, detail=RANKED_LATER)


def rank_groups(
    tasks: Sequence[Task], trajectories: tuple[Trajectory, ...], group_size: int, ranked: set[int]
) -> tuple[Trajectory, ...]:
    """``trajectories`` with the episodes of ``ranked`` tasks scored by ranking each group's
    answers together. An episode that ended in an infra error (its generation failed) keeps it."""
    from veriloop.verifiers import verify_many

    places, pairs = [], []
    for task_index in sorted(ranked):
        task = tasks[task_index]
        for place in range(task_index * group_size, (task_index + 1) * group_size):
            trajectory = trajectories[place]
            if trajectory.score is not None and trajectory.score.status == "infra_error":
                continue
            turns = tuple(turn.text for turn in trajectory.turns if turn.role == "assistant")
            response = Response(id=trajectory.id, task_id=task.id, response=trajectory.response, turns=turns)
            places.append(place)
            pairs.append((task, response))
    updated = list(trajectories)
    for place, score in zip(places, verify_many(pairs)):
        trajectory = updated[place]
        updated[place] = trajectory.model_copy(
            update={
                "reward": score.reward,
                "score": score.model_copy(update={"id": trajectory.id}),
                "environment": score.environment or trajectory.environment,
            }
        )
    return tuple(updated)


def rollout(tasks: Sequence[Task], engine: Engine, config: EpisodeConfig, **options) -> RolloutBatch:
    """Synchronous wrapper of ``arollout``."""
    return run_coroutine(arollout(tasks, engine, config, **options))


def run_coroutine(coroutine: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` without its Ctrl-C handler, on a fresh event loop.

    Installing and removing that handler formats the repr of the main task, arguments and
    all, which costs milliseconds per call when the arguments are hundreds of tasks: a
    noticeable share of a small RL step.
    """
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coroutine)
    except BaseException:
        _cancel_pending(loop)  # an interrupt mid-rollout: no task is left to report its exception at exit
        raise
    finally:
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            loop.close()


def _cancel_pending(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel the loop's unfinished tasks and collect every task's outcome, so none is left unretrieved."""
    tasks = asyncio.all_tasks(loop)
    for task in tasks:
        task.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))


def summarize_rollout(
    trajectories: Sequence[Trajectory], wall_s: float, sandbox_workers: int = 1, engine_busy_s: float = 0.0
) -> RolloutMetrics:
    generated = sum(
        sum(sum(c.loss_mask) for c in t.contexts())
        if t.loss_mask
        else sum(len(x.token_ids) for x in t.turns if x.role == "assistant")
        for t in trajectories
    )
    scored = [t for t in trajectories if t.score is not None and t.score.status == "scored"]
    tools_s = sum(t.timings.get("tools_s", 0.0) for t in trajectories)
    wall = max(wall_s, 1e-9)
    return RolloutMetrics(
        episodes=len(trajectories),
        wall_s=round(wall_s, 4),
        generated_tokens=generated,
        rollout_tokens_per_s=round(generated / wall, 2),
        generate_busy_s=round(sum(t.timings.get("generate_s", 0.0) for t in trajectories), 4),
        engine_busy_s=round(engine_busy_s, 4),
        tools_busy_s=round(tools_s, 4),
        verify_busy_s=round(sum(t.timings.get("verify_s", 0.0) for t in trajectories), 4),
        sandbox_busy_fraction=round(min(1.0, tools_s / (wall * max(sandbox_workers, 1))), 4),
        mean_reward=round(sum(t.reward for t in scored) / len(scored), 4) if scored else None,
        pass_rate=round(sum(t.score.passed for t in scored) / len(trajectories), 4) if trajectories else 0.0,
        infra_errors=len(trajectories) - len(scored),
        stop_reasons=dict(Counter(t.stop_reason for t in trajectories)),
        **context_summary(trajectories),
    )


def context_summary(trajectories: Sequence[Trajectory]) -> dict[str, Any]:
    """Context figures of a set of episodes: tokens in the model's context at the start of its
    turns (mean and max over every turn), truncations and drops per episode."""
    context_tokens = [n for t in trajectories for n in t.context_tokens]
    episodes = max(len(trajectories), 1)
    return {
        "context_tokens_mean": round(sum(context_tokens) / len(context_tokens), 2) if context_tokens else 0.0,
        "context_tokens_max": max(context_tokens, default=0),
        "truncations_per_episode": round(sum(t.truncations for t in trajectories) / episodes, 4),
        "drops_per_episode": round(sum(t.drops for t in trajectories) / episodes, 4),
    }
