"""Rollout backends: where trajectories are generated, and how new weights reach the generator.

A backend turns ``(tasks, group_size, seed)`` into a ``RolloutBatch`` sampled by the policy
version it last received. Three exist:

- ``SharedBackend``: the trainer's own engine over the trainer's own model (synchronous
  training in one process; weight sync costs nothing because the weights are the same tensors).
- ``LocalBackend``: a ``RolloutWorker`` in this process with its own copy of the model, so that
  generation can run while the trainer changes its weights (the asynchronous pipeline).
- ``RayBackend`` (``veriloop.training._ray``): ``RolloutWorker`` actors on a Ray cluster.

A ``RolloutWorker`` is self-contained: built from a picklable ``WorkerSpec`` it loads the model,
its engine and its sandbox tools, so the same class runs in-process and as a Ray actor.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import torch

from veriloop.core import Registry, Task
from veriloop.rollout import EpisodeConfig, HFEngine, RolloutBatch, StopConfig, rollout
from veriloop.training._config import ModelSection, TrainConfig


Progress = Callable[[int, int], None]  # (episodes done, episodes in the batch)


@dataclasses.dataclass(frozen=True)
class WorkerSpec:
    """Everything a rollout worker needs to build itself, in any process."""

    model: ModelSection
    episode: EpisodeConfig
    max_batch_size: int
    concurrency: int
    tools: tuple[str, ...]
    sandbox_workers: int
    torch_threads: int = 0

    @classmethod
    def from_config(cls, config: TrainConfig) -> WorkerSpec:
        return cls(config.model, episode_config(config), config.rollout.max_batch_size, config.rollout.concurrency,
                   config.rollout.tools, config.pipeline.sandbox_workers, config.pipeline.torch_threads)


def episode_config(config: TrainConfig) -> EpisodeConfig:
    """How the trainer's episodes run, from its rollout section."""
    rollout = config.rollout
    return EpisodeConfig(
        temperature=rollout.temperature, top_p=rollout.top_p, max_tokens_per_turn=rollout.max_tokens, tools=rollout.tools,
        feedback_on_fail=rollout.feedback_on_fail,
        stop=StopConfig(max_turns=rollout.max_turns, max_total_tokens=rollout.max_tokens * rollout.max_turns * 4),
    )


def trainable_state(model: Any) -> dict[str, torch.Tensor]:
    """A detached CPU copy of the weights the trainer changes (with LoRA: the adapters only)."""
    return {name: p.detach().to("cpu", copy=True) for name, p in model.named_parameters() if p.requires_grad}


def full_state(model: Any) -> dict[str, torch.Tensor]:
    """A detached CPU copy of every weight (what a freshly built worker needs once)."""
    return {name: t.detach().to("cpu", copy=True) for name, t in model.state_dict().items()}


class RolloutWorker:
    """One generator: a model copy, its engine and (for code tools) its own sandbox pool.

    ``model``/``tokenizer`` may be given to skip loading (an in-process copy of the trainer's).
    """

    def __init__(self, spec: WorkerSpec, model: Any = None, tokenizer: Any = None):
        if spec.torch_threads:
            torch.set_num_threads(spec.torch_threads)
        if model is None:
            from veriloop.training._model import load_policy

            model, tokenizer = load_policy(spec.model)
        model.eval()
        for parameter in model.parameters():
            parameter.requires_grad_(False)
        self.spec = spec
        self.engine = HFEngine(model, tokenizer, max_batch_size=spec.max_batch_size)
        self.tools = sandbox_tools(spec.tools, spec.sandbox_workers)

    @property
    def policy_version(self) -> int:
        return self.engine.policy_version

    def set_weights(self, version: int, state: dict[str, torch.Tensor] | None) -> None:
        self.engine.update_weights(state, version)

    def rollout(self, tasks: Sequence[Task], group_size: int, seed: int, first_task_index: int = 0, progress: Progress | None = None) -> RolloutBatch:
        """``group_size`` episodes of each task with the current weights (see ``arollout``)."""
        return run_rollout(self.engine, self.spec, self.tools, tasks, group_size, seed, first_task_index, progress)

    def close(self) -> None:
        if self.tools is not None:
            self.tools.sandbox.close()
            self.tools = None


class RolloutBackend(Protocol):
    """What the trainer needs from wherever rollouts run."""

    policy_version: int

    def set_weights(self, version: int, state: dict[str, torch.Tensor] | None) -> None: ...

    def rollout(self, tasks: Sequence[Task], group_size: int, seed: int, progress: Progress | None = None) -> RolloutBatch:
        """Episodes in task order, grouped; ``progress(done, total)`` as episodes end (may be coarse)."""
        ...

    def close(self) -> None: ...


class SharedBackend:
    """Rollouts on the trainer's engine, whose model is the trainer's model (synchronous mode)."""

    def __init__(self, engine: HFEngine, spec: WorkerSpec, tools: Any):
        self.engine, self.spec, self.tools = engine, spec, tools

    @property
    def policy_version(self) -> int:
        return self.engine.policy_version

    def set_weights(self, version: int, state: dict[str, torch.Tensor] | None) -> None:
        self.engine.update_weights(None, version)  # same tensors: only the version tag moves

    def rollout(self, tasks: Sequence[Task], group_size: int, seed: int, progress: Progress | None = None) -> RolloutBatch:
        return run_rollout(self.engine, self.spec, self.tools, tasks, group_size, seed, 0, progress)

    def close(self) -> None:
        pass  # the trainer owns the engine and its tools


class LocalBackend:
    """A ``RolloutWorker`` in this process over a private copy of the policy."""

    def __init__(self, spec: WorkerSpec, model: Any, tokenizer: Any):
        self.worker = RolloutWorker(spec, copy.deepcopy(model), tokenizer)

    @property
    def policy_version(self) -> int:
        return self.worker.policy_version

    def set_weights(self, version: int, state: dict[str, torch.Tensor] | None) -> None:
        self.worker.set_weights(version, state)

    def rollout(self, tasks: Sequence[Task], group_size: int, seed: int, progress: Progress | None = None) -> RolloutBatch:
        return self.worker.rollout(tasks, group_size, seed, progress=progress)

    def close(self) -> None:
        self.worker.close()


def run_rollout(engine: HFEngine, spec: WorkerSpec, tools: Any, tasks: Sequence[Task], group_size: int, seed: int,
                first_task_index: int = 0, progress: Progress | None = None) -> RolloutBatch:
    return rollout(
        tasks, engine, spec.episode, group_size=group_size, concurrency=spec.concurrency, seed=seed, tools=tools,
        sandbox_workers=spec.sandbox_workers, first_task_index=first_task_index, progress=progress,
    )


def sandbox_tools(tools: Sequence[str], workers: int) -> Any:
    """Sandbox-backed tools when episodes may run code; None when they cannot."""
    if not {"python", "shell"} & set(tools):
        return None
    from veriloop.rollout import SandboxTools
    from veriloop.sandbox import Sandbox

    return SandboxTools(Sandbox(workers=workers))


def _local_backend(config: TrainConfig, spec: WorkerSpec, model: Any, tokenizer: Any) -> RolloutBackend:
    return LocalBackend(spec, model, tokenizer)


def _ray_backend(config: TrainConfig, spec: WorkerSpec, model: Any, tokenizer: Any) -> RolloutBackend:
    from veriloop.training._ray import RayBackend  # ray is imported only when chosen

    return RayBackend(spec, config.pipeline, full_state(model))


# pipeline.backend -> factory of the backend that generates apart from the trainer's model
# (the synchronous local run uses SharedBackend instead: no copy needed).
ROLLOUT_BACKENDS: Registry[Callable[[TrainConfig, WorkerSpec, Any, Any], RolloutBackend]] = Registry("rollout backend")
ROLLOUT_BACKENDS.add("local", _local_backend)
ROLLOUT_BACKENDS.add("ray", _ray_backend)
