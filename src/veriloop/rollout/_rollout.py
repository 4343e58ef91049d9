"""Rolling out a batch of tasks: many samples per task, episodes run concurrently.

Episodes are coroutines bounded by ``concurrency``. Token-level engines gather concurrent
generation requests into shared batches; while one batch generates, the tool calls and code
verifications of other episodes run on in their sandbox processes.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from veriloop.core import Task, Trajectory
from veriloop.rollout._engine import Engine
from veriloop.rollout._episode import EpisodeConfig, ToolExecutor, Verify, run_episode, verify_in_thread
from veriloop.rollout._stopping import StopPredicate


@dataclass(frozen=True)
class RolloutMetrics:
    """Per-batch figures. Busy fractions are summed over episodes, divided by wall time."""

    episodes: int
    wall_s: float
    generated_tokens: int
    rollout_tokens_per_s: float
    generate_busy_s: float
    tools_busy_s: float
    verify_busy_s: float
    sandbox_busy_fraction: float
    mean_reward: float | None
    pass_rate: float
    infra_errors: int
    stop_reasons: dict[str, int]


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
) -> RolloutBatch:
    """``group_size`` episodes of every task; trajectories come back grouped, in task order."""
    limit = asyncio.Semaphore(concurrency)

    async def one(task_index: int, task: Task, sample_index: int) -> Trajectory:
        episode_seed = None if seed is None else seed + 7919 * task_index + 104729 * sample_index
        async with limit:
            return await run_episode(
                task, engine, config, verify, tools, seed=episode_seed,
                group_id=f"{task.id}#{seed if seed is not None else 'x'}", sample_index=sample_index, predicate=predicate,
            )

    started = time.perf_counter()
    jobs = [one(i, task, j) for i, task in enumerate(tasks) for j in range(group_size)]
    trajectories = tuple(await asyncio.gather(*jobs))
    return RolloutBatch(trajectories, summarize(trajectories, time.perf_counter() - started, sandbox_workers))


def rollout(tasks: Sequence[Task], engine: Engine, config: EpisodeConfig, **options) -> RolloutBatch:
    """Synchronous wrapper of ``arollout``."""
    return asyncio.run(arollout(tasks, engine, config, **options))


def summarize(trajectories: Sequence[Trajectory], wall_s: float, sandbox_workers: int = 1) -> RolloutMetrics:
    generated = sum(sum(t.loss_mask) if t.loss_mask else sum(len(x.token_ids) for x in t.turns if x.role == "assistant") for t in trajectories)
    scored = [t for t in trajectories if t.score is not None and t.score.status == "scored"]
    tools_s = sum(t.timings.get("tools_s", 0.0) for t in trajectories)
    wall = max(wall_s, 1e-9)
    return RolloutMetrics(
        episodes=len(trajectories),
        wall_s=round(wall_s, 4),
        generated_tokens=generated,
        rollout_tokens_per_s=round(generated / wall, 2),
        generate_busy_s=round(sum(t.timings.get("generate_s", 0.0) for t in trajectories), 4),
        tools_busy_s=round(tools_s, 4),
        verify_busy_s=round(sum(t.timings.get("verify_s", 0.0) for t in trajectories), 4),
        sandbox_busy_fraction=round(min(1.0, tools_s / (wall * max(sandbox_workers, 1))), 4),
        mean_reward=round(sum(t.reward for t in scored) / len(scored), 4) if scored else None,
        pass_rate=round(sum(t.score.passed for t in scored) / len(trajectories), 4) if trajectories else 0.0,
        infra_errors=len(trajectories) - len(scored),
        stop_reasons=dict(Counter(t.stop_reason for t in trajectories)),
    )
