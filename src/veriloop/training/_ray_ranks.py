"""Training ranks as Ray actors: ``distributed.ray_ranks`` processes that form one process group.

``veriloop train CONFIG distributed.ray_ranks=N`` (or ``veriloop sft``) makes this process a
driver: it joins the cluster of ``pipeline.ray_address`` (a private single-node Ray without one,
as the rollout backend does, ``_ray.connect``), starts N actors, each reserving
``distributed.rank_cpus`` CPUs and ``distributed.rank_gpus`` GPUs, asks rank 0 for its node's
address and a free port there, and runs the trainer in every actor as rank r of N with the
environment torchrun would have set (``LOCAL_RANK`` 0: Ray gives each actor its own GPUs). From
there the ranks are exactly torchrun's (``_distributed.py``).

``run.out`` must be a path every rank's node sees (a shared file system) when the ranks span
nodes: rank 0 writes there, and every rank reads the checkpoint it resumes from there.

The driver follows rank 0's progress (``on_step`` gets what the trainer's ``on_step`` got). An
actor that dies ends the run at once: the others are killed and ``RankLost`` names the rank; an
exception raised inside a rank (a bad config, a bug) is re-raised here as it was raised there.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Callable
from typing import Any

import ray
from ray.exceptions import RayActorError, RayTaskError

from veriloop.training._distributed import RankInfo, RankLost
from veriloop.training._ray import connect

POLL_S = 0.5
_SETTLE_S = 3.0  # after a rank's error: how long to look for the death that may have caused it


def _train_rl(config: Any, on_step: Callable[..., None]) -> None:
    from veriloop.training._rl import RLTrainer

    RLTrainer(config).train(on_step=on_step)


def _train_sft(config: Any, on_step: Callable[..., None]) -> None:
    from veriloop.training._sft import run_sft

    run_sft(config, on_step=on_step)


JOBS: dict[str, Callable[[Any, Callable[..., None]], None]] = {"rl": _train_rl, "sft": _train_sft}


@ray.remote(max_restarts=0, max_concurrency=2)  # ``progress`` answers while ``run`` trains
class _TrainingRank:
    """One rank's process. ``run`` trains; ``progress`` returns the arguments of the latest
    ``on_step`` call (None before the first step)."""

    def __init__(self) -> None:
        self.latest: tuple[Any, ...] | None = None

    def address(self) -> tuple[str, int]:
        """This node's address, and a port free on it now (for the rendezvous store)."""
        host = ray.util.get_node_ip_address()
        with socket.socket() as probe:
            probe.bind((host, 0))
            return host, probe.getsockname()[1]

    def run(self, kind: str, config: Any, info: RankInfo) -> None:
        os.environ.update(
            RANK=str(info.rank),
            WORLD_SIZE=str(info.world_size),
            LOCAL_RANK=str(info.local_rank),
            MASTER_ADDR=info.master_addr,
            MASTER_PORT=str(info.master_port),
        )

        def on_step(*event: Any) -> None:
            self.latest = event

        JOBS[kind](config, on_step)

    def progress(self) -> tuple[Any, ...] | None:
        return self.latest


def train_on_ray(kind: str, config: Any, on_step: Callable[..., None] | None = None) -> None:
    """Train ``config`` (a TrainConfig for ``kind`` "rl", an SFTConfig for "sft") on
    ``config.distributed.ray_ranks`` Ray actors; returns when every rank has finished.

    Raises ``RankLost`` when an actor dies, and any exception a rank raised.
    """
    section = config.distributed
    owns_connection = connect(config.pipeline.ray_address if hasattr(config, "pipeline") else "")
    options = {"num_cpus": section.rank_cpus, "num_gpus": section.rank_gpus, "scheduling_strategy": "SPREAD"}
    actors = [_TrainingRank.options(**options).remote() for _ in range(section.ray_ranks)]
    try:
        host, port = ray.get(actors[0].address.remote())
        runs = [
            actor.run.remote(kind, config, RankInfo(rank, len(actors), 0, host, port))
            for rank, actor in enumerate(actors)
        ]
        _follow(actors, runs, on_step)
    finally:
        for actor in actors:
            with contextlib.suppress(Exception):
                ray.kill(actor, no_restart=True)
        if owns_connection:
            ray.shutdown()


def _follow(actors: list[Any], runs: list[Any], on_step: Callable[..., None] | None) -> None:
    """Wait for every rank, passing rank 0's progress on; the first failure ends the wait."""
    pending, shown = list(runs), None
    while pending:
        done, pending = ray.wait(pending, num_returns=len(pending), timeout=POLL_S)
        failed = [ref for ref in done if _failure(ref) is not None]
        if failed:
            raise _explain(actors, runs, failed[0])
        if on_step is not None and runs[0] in pending:
            with contextlib.suppress(RayActorError):
                latest = ray.get(actors[0].progress.remote(), timeout=POLL_S * 4)
                if latest is not None and latest != shown:
                    shown = latest
                    on_step(*latest)
    if on_step is not None:  # the last step, if the poll missed it
        with contextlib.suppress(RayActorError):
            latest = ray.get(actors[0].progress.remote())
            if latest is not None and latest != shown:
                on_step(*latest)


def _failure(ref: Any) -> BaseException | None:
    try:
        ray.get(ref, timeout=0)
    except (RayActorError, RayTaskError) as error:
        return error
    return None


def _explain(actors: list[Any], runs: list[Any], first: Any) -> BaseException:
    """The error to raise for a failed rank: a dead actor (looked for a moment, since a survivor's
    error may come first) as ``RankLost``, else the exception the rank raised."""
    deadline = time.monotonic() + _SETTLE_S
    while True:
        for rank, ref in enumerate(runs):
            ready, _ = ray.wait([ref], timeout=0)
            if ready and isinstance(_failure(ref), RayActorError):
                return RankLost(
                    f"rank {rank} of {len(runs)} lost (its Ray actor died: the process was killed or its node "
                    "stopped); rerun the same command to resume from the last checkpoint"
                )
        if time.monotonic() > deadline:
            break
        time.sleep(0.2)
    error = _failure(first)
    cause = getattr(error, "cause", None)
    return cause if isinstance(cause, BaseException) else error  # type: ignore[return-value]
