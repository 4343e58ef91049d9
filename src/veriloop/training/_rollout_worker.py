"""The rollout worker: one generator with its own model copy, engine and sandbox tools.

A ``RolloutWorker`` is self-contained: built from a picklable ``WorkerSpec`` it loads the model,
its engine and its sandbox tools, so the same class runs in the trainer's process (the local
backend of the asynchronous pipeline) and as a Ray actor (``_ray.py``). Its engine is the spec's
``engine`` from ``WORKER_ENGINES``: ``hf`` (a model copy, sent weights under the trainer's own
names) or ``vllm`` (an in-process vLLM, sent weights under Hugging Face names, LoRA merged:
``hf_weights``). It satisfies the ``RolloutBackend`` protocol (``_backends.py``) itself. This
module also holds what every generator needs: the episode settings of a config, the sandbox
tools, the weight snapshots sent to workers, and the one call that runs a batch of episodes.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import torch

from veriloop.core import Registry, Task, load_plugins
from veriloop.rollout import (
    AgentProgram,
    EpisodeConfig,
    HFEngine,
    RolloutBatch,
    StopConfig,
    agent_rollout,
    create_engine,
    rollout,
)
from veriloop.training._config import ModelSection, TrainConfig

Progress = Callable[[int, int], None]  # (episodes done, episodes in the batch)


@dataclasses.dataclass(frozen=True)
class VLLMSettings:
    """How a ``vllm`` engine is built for rollouts (the rollout section's ``vllm_*`` fields)."""

    dtype: str = "float32"  # the trainer's weights' dtype: vLLM runs it, pushed tensors are cast to it
    kv_cache_bytes: int = 256 * 2**20
    max_model_len: int | None = None  # None: the model's positions, at most 4096
    max_num_seqs: int = 256
    seed: int = 0

    @classmethod
    def from_config(cls, config: TrainConfig, model: Any) -> VLLMSettings:
        """The settings of ``config`` for a trainer whose policy is ``model``."""
        rollout = config.rollout
        return cls(
            dtype=str(next(model.parameters()).dtype).removeprefix("torch."),
            kv_cache_bytes=rollout.vllm_kv_cache_mb * 2**20,
            max_model_len=rollout.vllm_max_model_len or None,
            max_num_seqs=rollout.vllm_max_num_seqs,
            seed=config.run.seed,
        )


def vllm_engine(model_path: str, settings: VLLMSettings) -> Any:
    """An in-process vLLM engine over the model directory ``model_path`` (its own weights until pushed)."""
    return create_engine("vllm", model=model_path, **dataclasses.asdict(settings))


@dataclasses.dataclass(frozen=True)
class WorkerSpec:
    """Everything a rollout worker needs to build itself, in any process (it is pickled to Ray actors).

    A new field needs a default, and its value from the config in ``from_config``.
    """

    model: ModelSection
    episode: EpisodeConfig
    max_batch_size: int
    concurrency: int
    tools: tuple[str, ...]
    sandbox_workers: int
    torch_threads: int = 0
    plugins: tuple[str, ...] = ()  # resolved plugin references, imported before anything is built
    engine: str = "hf"  # a name in WORKER_ENGINES
    vllm: VLLMSettings = VLLMSettings()  # engine "vllm": how it is built
    sample_dtype: str = "model"  # engine "hf": the precision it samples in (rollout.dtype)
    agent: AgentProgram | None = None  # rollout.agent: episodes are this program's, through a gateway

    @classmethod
    def from_config(cls, config: TrainConfig, model: Any) -> WorkerSpec:
        """The spec of ``config``'s workers beside a trainer whose policy is ``model``."""
        return cls(
            model=config.model,
            episode=episode_config(config),
            max_batch_size=config.rollout.max_batch_size,
            concurrency=config.rollout.concurrency,
            tools=config.rollout.tools,
            sandbox_workers=config.pipeline.sandbox_workers,
            torch_threads=config.pipeline.torch_threads,
            plugins=tuple(config.plugins),
            engine=config.rollout.engine,
            vllm=VLLMSettings.from_config(config, model),
            sample_dtype=config.rollout.dtype,
            agent=config.rollout.agent,
        )


def episode_config(config: TrainConfig) -> EpisodeConfig:
    """How the trainer's episodes run, from its rollout section."""
    rollout = config.rollout
    return EpisodeConfig(
        temperature=rollout.temperature,
        top_p=rollout.top_p,
        top_k=rollout.top_k,
        max_tokens_per_turn=rollout.max_tokens,
        max_tokens_by_domain=rollout.max_tokens_by_domain,
        tools=rollout.tools,
        tool_instructions=rollout.tool_instructions,
        feedback_on_fail=rollout.feedback_on_fail,
        context_budget=rollout.context_budget,
        context_policy=rollout.context_policy,
        reuse_kv=rollout.reuse_kv,
        stop=StopConfig(
            max_turns=rollout.max_turns, max_total_tokens=rollout.largest_max_tokens * rollout.max_turns * 4
        ),
    )


def trainable_state(model: Any) -> dict[str, torch.Tensor]:
    """A detached CPU copy of the weights the trainer changes (with LoRA: the adapters only)."""
    return cpu_copy({name: p for name, p in model.named_parameters() if p.requires_grad})


def hf_weights(model: Any, trainable_only: bool = False) -> dict[str, torch.Tensor]:
    """The policy's weights under Hugging Face names, as a plain model directory holds them (what
    a vLLM engine loads), LoRA adapters merged into the layers they adapt. With ``trainable_only``,
    just the tensors an update changes: the trainable ones, or with LoRA the adapted layers (each
    with its bias, since vLLM reloads a layer whole). Tensors are the model's own (detached, not
    copied) where nothing is merged."""
    if not hasattr(model, "peft_config"):
        named = model.named_parameters() if trainable_only else model.state_dict().items()
        return {name: t.detach() for name, t in named if not trainable_only or t.requires_grad}
    from peft.tuners.lora import LoraLayer

    base = model.get_base_model()
    weights = {} if trainable_only else _unadapted_state(base)
    with torch.no_grad():
        for name, module in base.named_modules():
            if isinstance(module, LoraLayer):
                delta = sum(module.get_delta_weight(a) for a in module.active_adapters if a in module.lora_A)
                layer = module.get_base_layer()
                weights[f"{name}.weight"] = layer.weight.detach() + delta
                if getattr(layer, "bias", None) is not None:
                    weights[f"{name}.bias"] = layer.bias.detach()
    return weights


def _unadapted_state(base: Any) -> dict[str, torch.Tensor]:
    """A LoRA-wrapped model's own weights under their plain names (adapters left out)."""
    return {
        name.replace(".base_layer.", "."): t.detach() for name, t in base.state_dict().items() if "lora_" not in name
    }


def full_state(model: Any) -> dict[str, torch.Tensor]:
    """A detached CPU copy of every weight (what a freshly built worker needs once)."""
    return cpu_copy(model.state_dict())


def vllm_update(model: Any, *, kept: bool) -> dict[str, torch.Tensor]:
    """What a vLLM engine loads after an update of ``model``: the changed weights under Hugging
    Face names, LoRA merged (``hf_weights``), read now. ``kept``: the update is loaded later (the
    asynchronous pipeline applies it between batches while the trainer goes on), so each tensor
    is a copy, on the model's device, that later updates leave alone."""
    weights = hf_weights(model, trainable_only=True)
    return {name: t.clone() for name, t in weights.items()} if kept else weights


def cpu_copy(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Detached CPU copies, safe to send to other processes and kept while the trainer updates."""
    return {name: t.detach().to("cpu", copy=True) for name, t in state.items()}


WorkerEngineFactory = Callable[["WorkerSpec", Any, Any], Any]  # (spec, model or None, tokenizer or None)


def _hf_worker_engine(spec: WorkerSpec, model: Any, tokenizer: Any) -> HFEngine:
    """An ``hf`` engine over the spec's model, loaded here, or over a private copy of ``model``."""
    if model is None:
        from veriloop.training._model import load_policy

        model, tokenizer = load_policy(spec.model)
    else:
        model = copy.deepcopy(model)
    model.eval()
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    return HFEngine(model, tokenizer, max_batch_size=spec.max_batch_size, sample_dtype=spec.sample_dtype)


def _vllm_worker_engine(spec: WorkerSpec, model: Any, tokenizer: Any) -> Any:
    """A ``vllm`` engine over the spec's model directory; a given ``model`` is ignored (the
    worker's weights arrive through ``set_weights``)."""
    return vllm_engine(spec.model.path, spec.vllm)


# WorkerSpec.engine -> what builds a worker's engine; every engine's update_weights loads the
# state dicts its backend sends.
WORKER_ENGINES: Registry[WorkerEngineFactory] = Registry("rollout worker engine")
WORKER_ENGINES.add("hf", _hf_worker_engine)
WORKER_ENGINES.add("vllm", _vllm_worker_engine)


class RolloutWorker:
    """One generator: a model copy, its engine and (for code tools) its own sandbox pool.

    ``model``/``tokenizer`` may be given to skip loading: an ``hf`` worker then generates with a
    private copy of ``model`` (the local backend, beside the trainer) and never modifies the one
    given. Its weights change only through ``set_weights``, under the names its engine loads.
    """

    receives_weights = True  # its weights are its own: the trainer sends them after each update

    def __init__(self, spec: WorkerSpec, model: Any = None, tokenizer: Any = None):
        load_plugins(spec.plugins)  # a Ray actor starts with none of the trainer's modules
        if spec.torch_threads:
            torch.set_num_threads(spec.torch_threads)
        self.spec = spec
        self.engine = WORKER_ENGINES.get(spec.engine)(spec, model, tokenizer)
        self.tools = sandbox_tools(spec.tools, spec.sandbox_workers)

    @property
    def policy_version(self) -> int:
        return self.engine.policy_version

    def update_of(self, model: Any, *, kept: bool) -> dict[str, torch.Tensor]:
        """The weights of ``model`` an update changed, as ``set_weights`` loads them: a CPU copy,
        whenever it is loaded (see ``RolloutBackend.update_of``)."""
        return trainable_state(model)

    def set_weights(self, version: int, state: dict[str, torch.Tensor] | None) -> None:
        self.engine.update_weights(state, version)

    def rollout(
        self,
        tasks: Sequence[Task],
        group_size: int,
        seed: int,
        first_task_index: int = 0,
        progress: Progress | None = None,
    ) -> RolloutBatch:
        """``group_size`` episodes of each task with the current weights (see ``arollout``)."""
        return run_rollout(self.engine, self.spec, self.tools, tasks, group_size, seed, first_task_index, progress)

    def close(self) -> None:
        if self.tools is not None:
            self.tools.close()
            self.tools = None
        self.engine.close()


def run_rollout(
    engine: HFEngine,
    spec: WorkerSpec,
    tools: Any,
    tasks: Sequence[Task],
    group_size: int,
    seed: int,
    first_task_index: int = 0,
    progress: Progress | None = None,
) -> RolloutBatch:
    """Episodes of ``tasks`` on ``engine`` with the worker settings of ``spec``: the native loop,
    or the agent program of ``spec.agent`` through a gateway over ``engine``."""
    if spec.agent is not None:
        episode = spec.episode
        return agent_rollout(
            tasks,
            engine,
            spec.agent,
            group_size=group_size,
            temperature=episode.temperature,
            top_p=episode.top_p,
            top_k=episode.top_k,
            max_tokens=episode.max_tokens_per_turn,
            concurrency=spec.concurrency,
            seed=seed,
            first_task_index=first_task_index,
            progress=progress,
        )
    return rollout(
        tasks,
        engine,
        spec.episode,
        group_size=group_size,
        concurrency=spec.concurrency,
        seed=seed,
        tools=tools,
        sandbox_workers=spec.sandbox_workers,
        first_task_index=first_task_index,
        progress=progress,
    )


def sandbox_tools(tools: Sequence[str], workers: int) -> Any:
    """Sandbox-backed tools when episodes may run code; None when they cannot."""
    if not {"python", "shell"} & set(tools):
        return None
    from veriloop.rollout import SandboxTools
    from veriloop.sandbox import Sandbox

    return SandboxTools(Sandbox(workers=workers))
