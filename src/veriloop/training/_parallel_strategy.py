"""The data-parallel strategies of ``distributed.strategy``: how the policy's parameters, gradients
and optimizer state lie over the ranks of a run (``_distributed.py`` owns the ranks themselves).

- ``ddp`` (``Replicated``): every rank holds the whole model and its AdamW state; the gradients
  are summed across ranks with one all-reduce per optimizer step (``ProcessGroup.reduce_gradients``).
- ``fsdp`` (``Sharded``): FSDP2 (``torch.distributed.fsdp.fully_shard``). Each rank keeps 1/N of
  every parameter (the DTensor shards the optimizer steps on), of its gradient and of its AdamW
  moments. The training pass enters the FSDP unit, which all-gathers the parameters before it
  and, in the backward pass, reduce-scatters (sums) their gradients into the shards, once per
  micro-batch. Once per optimizer step, after the update, the full weights are gathered again
  (``gather_weights``, one all-gather) and stay in the model's parameters until the next update:
  the rollout engine, evaluation and checkpoints read them there, so the engine shares the
  trainer's model as under ddp and needs no copy of its own (saving reads them without
  ``state_dict``, whose FSDP hook would reshard them: ``model_state``). Memory per rank: the full weights
  (and, during the update, their full gradient) plus 1/N of the parameters, gradients and AdamW
  moments; ddp holds all of these whole (4x the weights in fp32).

The whole model is one FSDP unit because the lean decoder (the training pass) computes each layer
from its weights without calling the layer's ``forward``, which is where FSDP hooks a unit in;
``_LeanPass`` makes the lean pass the unit's ``forward``. Hence fsdp needs a model the lean
decoder runs (Llama, Qwen2 and Mistral shapes) and no LoRA.

Every FSDP collective must run on every rank: ``micro_batches`` gives each rank as many passes
(a rank with fewer micro-batches adds idle ones whose loss is zero), and checkpoints gather the
optimizer state on every rank before rank 0 writes it (``optimizer_state``), in the layout one
process saves, so a checkpoint resumes at any world size and under either strategy.

``auto`` means fsdp on CUDA devices for models fsdp can shard and ddp elsewhere: on CPU (gloo)
the memory saved is host memory, usually plentiful, and ddp's one all-reduce a step costs less
than fsdp's all-gather and reduce-scatter per micro-batch (1.3x the update time on the tiny model,
``bench/data_parallel_strategies.py``). fsdp runs on CPU with gloo when asked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch

from veriloop.core import UserError
from veriloop.rollout import LeanDecoder


class Replicated:
    """ddp: the whole model on every rank, gradients all-reduced once per optimizer step."""

    name = "ddp"
    lean: Any = None  # the training pass's lean decoder when it differs from the engine's

    def __init__(self, ranks: Any, model: Any, device: str):
        self.ranks = ranks

    def micro_batches(self, plan: list[slice]) -> Iterator[slice]:
        """The row slices of this rank's micro-batches (its ``_batch.micro_batch_plan``)."""
        return iter(plan)

    def reduce_gradients(self, parameters: Iterable[torch.nn.Parameter]) -> None:
        """After the micro-batches: the gradients summed over the ranks, in place."""
        self.ranks.reduce_gradients(parameters)

    def gather_weights(self) -> None:
        """After an update: the full weights in the model's parameters (ddp: they always are)."""

    def optimizer_state(self, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
        """The optimizer's ``state_dict`` as one process holds it (call on every rank)."""
        return optimizer.state_dict()

    def model_state(self, model: Any) -> dict[str, torch.Tensor] | None:
        """The whole weights to save, for ``save_pretrained(state_dict=...)``; None: the model's own
        ``state_dict``."""
        return None

    def load_optimizer_state(self, optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> None:
        """Load a state saved by ``optimizer_state`` at any world size, under either strategy."""
        optimizer.load_state_dict(state)


class Sharded(Replicated):
    """fsdp: parameters, gradients and AdamW state sharded over the ranks by FSDP2 (module docstring)."""

    name = "fsdp"

    def __init__(self, ranks: Any, model: Any, device: str):
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        self.ranks = ranks
        self.unit = _LeanPass(model)
        fully_shard(self.unit, mesh=init_device_mesh(torch.device(device).type, (ranks.world_size,)))
        # Sums, not means: each rank's loss is already weighted by its share of the whole step.
        self.unit.set_gradient_divide_factor(1.0)
        self.unit.set_force_sum_reduction_for_comms(True)  # gloo has no pre-multiplied sum
        self.lean = _HookedLean(self.unit, LeanDecoder(model))

    def micro_batches(self, plan: list[slice]) -> Iterator[slice]:
        """This rank's micro-batches (``plan``), then idle passes up to the most any rank runs, so
        that every rank joins each of the unit's all-gathers and reduce-scatters."""
        mine = plan
        most = max(self.ranks.gather(len(mine)))
        yield from mine
        for _ in range(most - len(mine)):
            self._idle_pass()

    def reduce_gradients(self, parameters: Iterable[torch.nn.Parameter]) -> None:
        """Nothing left to do: FSDP reduce-scattered every micro-batch's gradient into the shards."""

    def gather_weights(self) -> None:
        """All-gather the full weights into the model's parameters, on every rank; they stay there
        (for sampling, evaluation and saving) until the next update's first backward pass."""
        self.unit.unshard()

    def optimizer_state(self, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
        """The state with every sharded tensor gathered whole (a collective: call on every rank)."""
        state = optimizer.state_dict()
        return {
            "state": {
                index: {key: _whole(value) for key, value in moments.items()}
                for index, moments in state["state"].items()
            },
            "param_groups": state["param_groups"],
        }

    def model_state(self, model: Any) -> dict[str, torch.Tensor]:
        """The gathered weights, read from the modules without ``state_dict``, whose FSDP pre-save
        hook would reshard the parameters (and hand back shards). Call between ``gather_weights``
        and the next update."""
        state = {}
        for prefix, module in model.named_modules():
            dot = f"{prefix}." if prefix else ""
            for name, parameter in module._parameters.items():
                if parameter is not None:
                    state[dot + name] = parameter.detach()
            for name, buffer in module._buffers.items():
                if buffer is not None and name not in module._non_persistent_buffers_set:
                    state[dot + name] = buffer.detach()
        return state

    def load_optimizer_state(self, optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> None:
        """Load whole tensors, each cut into this rank's shard of its parameter (every rank loads)."""
        parameters = [p for group in optimizer.param_groups for p in group["params"]]  # state's index order
        sharded = {
            index: {key: _shard_like(value, parameters[int(index)]) for key, value in moments.items()}
            for index, moments in state["state"].items()
        }
        optimizer.load_state_dict({"state": sharded, "param_groups": state["param_groups"]})

    def _idle_pass(self) -> None:
        """One padding token through the unit with a zero loss: this rank's part in a micro-batch's
        collectives (it adds zeros to the gradient)."""
        device = self.lean.decoder.embed.weight.device
        ids = torch.zeros((1, 1), dtype=torch.long, device=device)  # (1, 1)
        hidden = self.lean.forward(ids, torch.zeros_like(ids), torch.ones_like(ids, dtype=torch.bool), head=False)
        (self.lean.head(hidden).sum() * 0.0).backward()


STRATEGIES: dict[str, Callable[[Any, Any, str], Replicated]] = {"ddp": Replicated, "fsdp": Sharded}


def strategy_for(name: str, ranks: Any, model: Any, device: str) -> Replicated:
    """The strategy ``distributed.strategy`` (``name``) trains ``model`` with over ``ranks`` (one
    process has nothing to shard: ddp's layout)."""
    name = strategy_name(name, model, device)
    return STRATEGIES[name](ranks, model, device) if ranks.world_size > 1 else Replicated(ranks, model, device)


def strategy_name(name: str, model: Any, device: str) -> str:
    """What ``distributed.strategy`` (``name``) means for ``model`` on ``device``: ``auto`` is fsdp on
    CUDA for a model fsdp shards, ddp otherwise. A UserError when fsdp is asked for a model it
    cannot shard."""
    shardable = LeanDecoder.supports(model)
    if name == "auto":
        return "fsdp" if shardable and torch.device(device).type == "cuda" else "ddp"
    if name == "fsdp" and not shardable:
        what = "a LoRA policy" if hasattr(model, "peft_config") else f"model type {model.config.model_type!r}"
        raise UserError(
            f"distributed.strategy: fsdp shards models the lean decoder runs (Llama, Qwen2 and Mistral shapes, "
            f"without LoRA), and this is {what}; use distributed.strategy=ddp"
        )
    return name


def as_float(value: torch.Tensor) -> float:
    """A scalar tensor's value; a DTensor's (the gradient norm under fsdp) gathered first."""
    from torch.distributed.tensor import DTensor

    return float(value.full_tensor() if isinstance(value, DTensor) else value)


class _LeanPass(torch.nn.Module):
    """The FSDP unit: holds the policy (so its parameters belong to the unit); its ``forward``
    runs a lean decoder pass, so FSDP's hooks wrap the pass."""

    def __init__(self, policy: Any):
        super().__init__()
        self.policy = policy

    def forward(self, run: Callable[..., torch.Tensor], *args: Any, **kwargs: Any) -> torch.Tensor:
        return run(*args, **kwargs)


class _HookedLean:
    """A LeanDecoder whose passes enter the FSDP unit; ``head`` runs on the gathered weights,
    which stay gathered until the backward pass ends."""

    def __init__(self, unit: _LeanPass, decoder: LeanDecoder):
        self.unit, self.decoder = unit, decoder

    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        return self.unit(self.decoder.forward, *args, **kwargs)

    def forward_prefixed(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        return self.unit(self.decoder.forward_prefixed, *args, **kwargs)

    def head(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.decoder.head(hidden)


def _whole(value: Any) -> Any:
    from torch.distributed.tensor import DTensor

    return value.full_tensor() if isinstance(value, DTensor) else value


def _shard_like(value: Any, parameter: Any) -> Any:
    """``value`` cut like ``parameter`` when it is a whole tensor of a sharded parameter's shape."""
    from torch.distributed.tensor import DTensor, distribute_tensor

    if not (isinstance(parameter, DTensor) and torch.is_tensor(value) and value.shape == parameter.shape):
        return value
    return distribute_tensor(value.to(parameter.device), parameter.device_mesh, parameter.placements)
