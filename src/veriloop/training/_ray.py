"""The ``ray`` rollout backend: ``RolloutWorker`` actors on a Ray cluster, one shard per actor.

A batch is split into contiguous shards of tasks, one per actor. Episode seeds follow from each
task's index in the whole batch (``arollout``'s ``first_task_index``), so the concatenated shards
are the batch one ``RolloutWorker`` with the same weights would sample for the same tasks and seed,
however many actors share it (token for token when both use the same torch thread count,
``pipeline.torch_threads``: CPU kernels may sum in another order with another count).

The driver keeps the latest full weights. An actor lost mid-batch (its process or its node died)
is replaced by a fresh one brought to the current weights and policy version, and only the shards
that had not come back run again: every task's episodes appear exactly once.

With ``rollout.engine=vllm`` (``RayVLLMBackend``) each actor builds a vLLM engine in its own
process and loads Hugging Face names, LoRA merged: the driver reads, from the trainer's model,
what the colocated backend would load (``vllm_update``) and sends CPU copies. A vLLM sample
depends on its seed, not its batch mates, so the shards again add up to one worker's batch
(tested against the colocated engine: the same tokens, log-probs within 1e-4).

This module imports ``ray``; ``_backends.py`` imports it only when ``pipeline.backend=ray``. It builds on
``_rollout_worker.py`` and never imports ``_backends.py``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import socket
import time
from collections.abc import Iterator, Sequence
from typing import Any

import ray
import torch
from ray.exceptions import ObjectLostError, RayActorError

from veriloop.core import Task
from veriloop.rollout import RolloutBatch, summarize_rollout
from veriloop.training._config import PipelineSection
from veriloop.training._rollout_worker import (
    Progress,
    RolloutWorker,
    WorkerSpec,
    cpu_copy,
    hf_weights,
    trainable_state,
    vllm_update,
)

log = logging.getLogger("veriloop.training")

# How a lost worker shows on the driver: its process or node died (RayActorError, ActorDiedError
# included), or its finished result sat on a node that died before the driver fetched it.
_LOST = (RayActorError, ObjectLostError)
_CLOSE_TIMEOUT_S = 30.0


class RolloutWorkerLost(RuntimeError):
    """A shard was lost with every fresh worker it was given (``pipeline.worker_retries`` + 1)."""


@dataclasses.dataclass(frozen=True)
class WorkerPlacement:
    """Where one rollout actor runs."""

    node_id: str  # Ray's id of the node (``ray.nodes()[i]["NodeID"]``)
    hostname: str
    pid: int


@ray.remote(max_restarts=0)  # the backend replaces lost actors itself, at the current weights
class _RolloutActor:
    """A ``RolloutWorker`` in a Ray worker process, started at a given weights version."""

    def __init__(self, spec: WorkerSpec, version: int, state: dict[str, torch.Tensor]):
        self.worker = RolloutWorker(spec)
        self.worker.set_weights(version, state)

    def placement(self) -> WorkerPlacement:
        return WorkerPlacement(ray.get_runtime_context().get_node_id(), socket.gethostname(), os.getpid())

    def set_weights(self, version: int, state: dict[str, torch.Tensor] | None) -> None:
        self.worker.set_weights(version, state)

    def rollout(self, tasks: Sequence[Task], group_size: int, seed: int, first_task_index: int) -> RolloutBatch:
        return self.worker.rollout(tasks, group_size, seed, first_task_index=first_task_index)

    def close(self) -> None:
        self.worker.close()


class RayBackend:
    """``pipeline.workers`` rollout actors on a Ray cluster (``pipeline.backend=ray``).

    ``initial_state`` is every weight of the policy (``full_state``), version 0 until the first
    ``set_weights``. ``rollout`` returns each task's ``group_size`` episodes exactly once, grouped
    in task order, sampled by the weights of the last ``set_weights``; its ``progress`` is coarse
    (called as each shard comes back). Lost actors are replaced; a shard lost
    ``pipeline.worker_retries`` + 1 times raises ``RolloutWorkerLost``. An exception raised inside
    a worker (a bug, a bad task) is re-raised as is. One call at a time (the asynchronous
    pipeline sets weights between batches, on the thread that samples them).
    """

    receives_weights = True  # each actor holds its own copy

    def __init__(self, spec: WorkerSpec, pipeline: PipelineSection, initial_state: dict[str, torch.Tensor]):
        self.spec, self.pipeline = spec, pipeline
        self._owns_connection = connect(pipeline.ray_address)
        self._version = 0
        self._state = dict(initial_state)  # the current full weights, for replacement actors
        self._state_ref: ray.ObjectRef | None = None
        self._actors: list[Any] = []
        try:
            self._actors = [self._start_actor() for _ in range(pipeline.workers)]
            # Wait until every model is loaded: a worker that cannot start fails here, not
            # inside the first training step, and the first rollout's wall time is honest.
            self.placements()
        except BaseException:
            self.close()
            raise

    @property
    def policy_version(self) -> int:
        return self._version

    def update_of(self, model: Any, *, kept: bool) -> dict[str, torch.Tensor]:
        """A CPU copy of the weights an update of ``model`` changed (sent to every actor)."""
        return trainable_state(model)

    def placements(self) -> list[WorkerPlacement]:
        """Where each actor runs, in shard order."""
        return ray.get([actor.placement.remote() for actor in self._actors])

    def set_weights(self, version: int, state: dict[str, torch.Tensor] | None) -> None:
        """Bring every actor to ``version``, loading ``state`` (all weights or a subset; None when
        only the version tag moves). The tensors are kept, not copied: don't modify them after."""
        if state:
            self._state.update(state)
            self._state_ref = None
        self._version = version
        update = ray.put(state) if state else None  # stored once, read by every actor
        calls = [actor.set_weights.remote(version, update) for actor in self._actors]
        for slot, call in enumerate(calls):
            try:
                ray.get(call)
            except _LOST as error:
                self._replace(slot, error)  # the replacement starts at this version

    def rollout(
        self, tasks: Sequence[Task], group_size: int, seed: int, progress: Progress | None = None
    ) -> RolloutBatch:
        """``group_size`` episodes of each task, sharded over the actors (see the class contract)."""
        started = time.perf_counter()
        shards = shard_bounds(len(tasks), len(self._actors))
        batches = self._run_shards(list(tasks), shards, group_size, seed, progress)
        trajectories = tuple(t for slot in range(len(shards)) for t in batches[slot].trajectories)
        engine_busy_s = sum(batch.metrics.engine_busy_s for batch in batches.values())  # summed over actors
        sandbox_workers = self.spec.sandbox_workers * len(self._actors)
        metrics = summarize_rollout(trajectories, time.perf_counter() - started, sandbox_workers, engine_busy_s)
        return RolloutBatch(trajectories, metrics)

    def close(self) -> None:
        """Stop the actors (their sandboxes end with them); disconnect from Ray if this backend
        connected. Safe to call twice."""
        actors, self._actors = self._actors, []
        if actors:
            # A clean close first, so sandboxes end in order; a dead or stuck actor is killed anyway.
            ray.wait([actor.close.remote() for actor in actors], num_returns=len(actors), timeout=_CLOSE_TIMEOUT_S)
            for actor in actors:
                ray.kill(actor)
        if self._owns_connection:
            ray.shutdown()
            self._owns_connection = False

    def _run_shards(
        self, tasks: list[Task], shards: list[tuple[int, int]], group_size: int, seed: int, progress: Progress | None
    ) -> dict[int, RolloutBatch]:
        """Each shard's batch by slot (shard ``slot`` runs on actor ``slot``), lost ones run again."""

        def submit(slot: int) -> ray.ObjectRef:
            start, stop = shards[slot]
            return self._actors[slot].rollout.remote(tasks[start:stop], group_size, seed, start)

        losses = [0] * len(shards)
        batches: dict[int, RolloutBatch] = {}
        running = {submit(slot): slot for slot in range(len(shards))}
        while running:
            [ready], _ = ray.wait(list(running), num_returns=1)
            slot = running.pop(ready)
            try:
                batches[slot] = ray.get(ready)
            except _LOST as error:
                losses[slot] += 1
                if losses[slot] > self.pipeline.worker_retries:
                    raise _lost_for_good(shards[slot], losses[slot], error) from error
                self._replace(slot, error)
                running[submit(slot)] = slot
                continue
            if progress is not None:
                progress(sum(len(batch.trajectories) for batch in batches.values()), len(tasks) * group_size)
        return batches

    def _start_actor(self) -> Any:
        """A new actor at the current weights and version."""
        if self._state_ref is None:
            self._state_ref = ray.put(self._state)
        # SPREAD: actors go to different nodes while any has room, rather than filling one first.
        options = {
            "num_cpus": self.pipeline.worker_cpus,
            "num_gpus": self.pipeline.worker_gpus,
            "scheduling_strategy": "SPREAD",
        }
        return _RolloutActor.options(**options).remote(self.spec, self._version, self._state_ref)

    def _replace(self, slot: int, error: BaseException) -> None:
        log.warning("rollout worker %d was lost (%s); starting a fresh one", slot, type(error).__name__)
        # Usually gone already; a worker that was only unreachable must not come back and run twice.
        with contextlib.suppress(Exception):
            ray.kill(self._actors[slot], no_restart=True)
        self._actors[slot] = self._start_actor()


class RayVLLMBackend(RayBackend):
    """``RayBackend`` whose actors sample with their own vLLM (``rollout.engine=vllm``).

    ``model`` is the trainer's policy: it is read (never modified) at start, for every weight,
    under Hugging Face names with LoRA merged; updates are ``update_of``'s, the changed weights
    in the same form (CPU copies). The contract is otherwise ``RayBackend``'s.
    """

    def __init__(self, spec: WorkerSpec, pipeline: PipelineSection, model: Any):
        super().__init__(spec, pipeline, cpu_copy(hf_weights(model)))

    def update_of(self, model: Any, *, kept: bool) -> dict[str, torch.Tensor]:
        return cpu_copy(vllm_update(model, kept=False))  # a copy either way


def _lost_for_good(shard: tuple[int, int], losses: int, error: BaseException) -> RolloutWorkerLost:
    start, stop = shard
    return RolloutWorkerLost(
        f"rollout of tasks [{start}:{stop}) was lost with {losses} Ray workers in a row ({type(error).__name__}, "
        f"chained below); check the worker nodes (memory, the logs under Ray's session directory) "
        f"or raise pipeline.worker_retries"
    )


def shard_bounds(count: int, parts: int) -> list[tuple[int, int]]:
    """``[start, stop)`` ranges that cover ``range(count)`` in order: at most ``parts`` of them,
    none empty, sizes differing by at most one."""
    parts = min(parts, count)
    bounds, start = [], 0
    for index in range(parts):
        stop = start + count // parts + (index < count % parts)
        bounds.append((start, stop))
        start = stop
    return bounds


def connect(address: str) -> bool:
    """Connect this process to Ray unless it already is; True when this call connected.

    ``address`` (or else ``RAY_ADDRESS``) names a cluster to join; with neither, a single-node
    Ray starts here, listening on loopback only and without a dashboard.
    """
    if ray.is_initialized():
        return False
    # Worker errors come back as exceptions: their logs need not reach the driver.
    quiet: dict[str, Any] = {"logging_level": logging.WARNING, "log_to_driver": False}
    address = address or os.environ.get("RAY_ADDRESS", "")
    if address:
        ray.init(address=address, **quiet)
    else:
        with _loopback_only():
            ray.init(address="local", include_dashboard=False, _node_ip_address="127.0.0.1", **quiet)
    return True


@contextlib.contextmanager
def _loopback_only() -> Iterator[None]:
    """Let a local start keep 127.0.0.1 as its node address.

    On Linux, Ray rewrites 127.0.0.1 to the host's routable address and then listens on every
    interface; it keeps loopback where it believes multi-node clusters unsupported (its macOS and
    Windows flag). A local Ray is one node, so that flag holds for the start.
    """
    from ray._private import ray_constants

    if not hasattr(ray_constants, "ENABLE_RAY_CLUSTER"):
        yield
        return
    saved = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved
