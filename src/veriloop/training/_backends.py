"""Rollout backends: where trajectories are generated, and how new weights reach the generator.

A backend turns ``(tasks, group_size, seed)`` into a ``RolloutBatch`` sampled by the policy
version it last received. ``rollout_backend_for`` decides which one a config gets:

- ``SharedBackend`` (``pipeline.mode=sync``, ``pipeline.backend=local``): the trainer's own engine
  over the trainer's own model; weight sync costs nothing because the weights are the same tensors.
- the local backend (``mode=async``, ``backend=local``): a ``RolloutWorker`` in this process over
  a private copy of the policy, so that generation runs while the trainer changes its weights.
- ``ColocatedVLLMBackend`` (``rollout.engine=vllm``, ``backend=local``): an in-process vLLM beside
  the trainer, sent the changed weights after every update (in async mode it samples on the
  producer thread while the trainer trains).
- ``RayBackend`` (``backend=ray``, ``_ray.py``): ``RolloutWorker`` actors on a Ray cluster; ``ray``
  is imported only when it is chosen. With ``rollout.engine=vllm`` it is a ``RayVLLMBackend``:
  each actor builds its own vLLM (a GPU each with ``pipeline.worker_gpus``) and is sent what the
  colocated backend loads (``vllm_update``).

After an update the trainer asks the backend for ``update_of(model, kept=...)`` at once, and
hands it to ``set_weights`` then (sync) or when the producer next starts a batch (async): what is
loaded is always the weights of the version it is tagged with, never a later update's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import torch

from veriloop.core import Registry, Task
from veriloop.rollout import HFEngine, RolloutBatch
from veriloop.training._config import TrainConfig
from veriloop.training._rollout_worker import (
    Progress,
    RolloutWorker,
    WorkerSpec,
    full_state,
    hf_weights,
    run_rollout,
    vllm_engine,
    vllm_update,
)


class RolloutBackend(Protocol):
    """What the trainer needs from wherever rollouts run."""

    policy_version: int
    receives_weights: bool  # False when the backend generates with the trainer's own tensors

    def update_of(self, model: Any, *, kept: bool) -> dict[str, torch.Tensor]:
        """The weights an update of the trainer's ``model`` changed, read now, in the form
        ``set_weights`` loads. ``kept``: they are loaded later, while the trainer goes on
        changing ``model``, so they must not share its tensors. Asked only when
        ``receives_weights``."""
        ...

    def set_weights(self, version: int, state: dict[str, torch.Tensor] | None) -> None: ...

    def rollout(
        self, tasks: Sequence[Task], group_size: int, seed: int, *, progress: Progress | None = None
    ) -> RolloutBatch:
        """Episodes in task order, grouped; ``progress(done, total)`` as episodes end (may be coarse)."""
        ...

    def close(self) -> None: ...


class SharedBackend:
    """Rollouts on the trainer's engine, whose model is the trainer's model (synchronous mode)."""

    receives_weights = False  # same tensors: only the version tag moves

    def __init__(self, engine: Any, spec: WorkerSpec, tools: Any):
        self.engine, self.spec, self.tools = engine, spec, tools

    @property
    def policy_version(self) -> int:
        return self.engine.policy_version

    def update_of(self, model: Any, *, kept: bool) -> dict[str, torch.Tensor]:
        return {}  # nothing to send: the engine samples with the trainer's own tensors

    def set_weights(self, version: int, state: dict[str, torch.Tensor] | None) -> None:
        self.engine.update_weights(None, version)

    def rollout(
        self,
        tasks: Sequence[Task],
        group_size: int,
        seed: int,
        progress: Progress | None = None,
        first_task_index: int = 0,
    ) -> RolloutBatch:
        """``first_task_index``: where ``tasks`` start in the whole batch (a data-parallel rank's
        share), so that their episodes get the seeds they have in the whole batch."""
        return run_rollout(self.engine, self.spec, self.tools, tasks, group_size, seed, first_task_index, progress)

    def close(self) -> None:
        pass  # the trainer owns the engine and its tools


class ColocatedVLLMBackend(SharedBackend):
    """Rollouts on an in-process vLLM engine beside the trainer (``rollout.engine=vllm``).

    The trainer keeps its own model for log-prob recomputation and training; after each update
    vLLM loads, in place, the weights the update changed (with LoRA: the adapted layers, adapters
    merged; ``vllm_update``): the model's own tensors in sync mode, copies taken at the update in
    async mode. At start it loads all of them, so a resumed or LoRA-wrapped policy samples with
    its own weights.
    """

    receives_weights = True  # vLLM holds its own copy of the weights

    def __init__(self, config: TrainConfig, spec: WorkerSpec, model: Any, tools: Any):
        engine = vllm_engine(config.model.path, spec.vllm)
        super().__init__(engine, spec, tools)
        engine.update_weights(hf_weights(model), 0)  # the version follows from rollout_backend_for

    def update_of(self, model: Any, *, kept: bool) -> dict[str, torch.Tensor]:
        return vllm_update(model, kept=kept)

    def set_weights(self, version: int, state: dict[str, torch.Tensor] | None) -> None:
        """``state`` None: only the version moves; otherwise vLLM loads it (``update_of``'s)."""
        self.engine.update_weights(state, version)

    def close(self) -> None:
        self.engine.close()


# The local backend is a RolloutWorker given the trainer's model, which it copies.
LocalBackend = RolloutWorker

BackendFactory = Callable[[TrainConfig, WorkerSpec, Any, Any], RolloutBackend]  # (config, spec, model, tokenizer)
VLLMBackendFactory = Callable[[TrainConfig, WorkerSpec, Any, Any], RolloutBackend]  # (config, spec, model, tools)


def _local_backend(config: TrainConfig, spec: WorkerSpec, model: Any, tokenizer: Any) -> RolloutBackend:
    return RolloutWorker(spec, model, tokenizer)


def _ray_backend(config: TrainConfig, spec: WorkerSpec, model: Any, tokenizer: Any) -> RolloutBackend:
    from veriloop.training._ray import RayBackend  # ray is imported only when chosen

    return RayBackend(spec, config.pipeline, full_state(model))


# pipeline.backend -> factory of the backend that generates with its own weights, beside a
# trainer with ``model``; consulted by ``rollout_backend_for`` only.
ROLLOUT_BACKENDS: Registry[BackendFactory] = Registry("rollout backend")
ROLLOUT_BACKENDS.add("local", _local_backend)
ROLLOUT_BACKENDS.add("ray", _ray_backend)


def _ray_vllm_backend(config: TrainConfig, spec: WorkerSpec, model: Any, tools: Any) -> RolloutBackend:
    from veriloop.training._ray import RayVLLMBackend  # ray is imported only when chosen

    return RayVLLMBackend(spec, config.pipeline, model)


# pipeline.backend -> factory of the backend that samples with vLLM (rollout.engine=vllm), beside
# a trainer with ``model`` and sandbox ``tools``; consulted by ``rollout_backend_for`` only.
VLLM_BACKENDS: Registry[VLLMBackendFactory] = Registry("vllm rollout backend")
VLLM_BACKENDS.add("local", ColocatedVLLMBackend)
VLLM_BACKENDS.add("ray", _ray_vllm_backend)


def rollout_backend_for(config: TrainConfig, *, engine: HFEngine, tokenizer: Any, tools: Any) -> RolloutBackend:
    """The backend a trainer with ``config`` samples from.

    ``engine`` is the trainer's own engine (over the trainer's model), ``tokenizer`` the model's and
    ``tools`` the trainer's sandbox tools. A backend with its own weights starts at the engine's
    policy version.
    """
    spec = WorkerSpec.from_config(config, engine.model)
    pipeline = config.pipeline
    if config.rollout.engine == "vllm":
        backend: RolloutBackend = VLLM_BACKENDS.get(pipeline.backend)(config, spec, engine.model, tools)
    elif pipeline.mode == "sync" and pipeline.backend == "local":  # nothing generates beside the trainer
        return SharedBackend(engine, spec, tools)
    else:
        backend = ROLLOUT_BACKENDS.get(pipeline.backend)(config, spec, engine.model, tokenizer)
    backend.set_weights(engine.policy_version, None)
    return backend
