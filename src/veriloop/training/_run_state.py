"""An RL run's mutable state, as one record: what a checkpoint keeps besides the weights.

``RLTrainer`` owns one ``RunState`` (``trainer.state``). Everything else it holds is wiring that
a run rebuilds from its config (model, tokenizer, engine, tasks, loggers, rollout backend), so
the record and the weights are the whole of a resumable run. The record leaves as one dict
(``state_dict``) and comes back whole (``load_state_dict``); a checkpoint that lacks any part of
it is refused with a ``UserError``, never half-restored.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from veriloop.core import UserError
from veriloop.scheduling import DomainSchedule
from veriloop.training._checkpoint import rng_state, set_rng_state
from veriloop.training._config import OptimSection
from veriloop.training._data import TaskSampler

# The keys of a saved record (``trainer_state.pt``); the SFT trainer's checkpoints share the
# first five. Counters sit under "extra", the name checkpoints used before the record existed.
SAVED_KEYS = ("step", "optimizer", "scheduler", "rng", "sampler", "extra")
SAVED_COUNTERS = ("policy_version", "draws", "trajectory_parts")


@dataclass(eq=False)
class RunState:
    """Everything about an RL run that its steps change, and a resumed run must continue from.

    The optimizer, scheduler and sampler are the live objects (the trainer's update and sampling
    advance them in place); the rest are plain counters the trainer moves at each step. The
    process's random generators (Python's, NumPy's, torch's, CUDA's) belong to the state too, but
    they are global: ``state_dict`` reads them and ``load_state_dict`` sets them.
    """

    # AdamW over the trainable parameters: its moments (two tensors of each parameter's shape)
    # and per-parameter step counts.
    optimizer: torch.optim.Optimizer
    # The learning-rate schedule; its ``last_epoch`` counts optimizer steps (``updates_per_batch``
    # of them per trained step).
    scheduler: torch.optim.lr_scheduler.LRScheduler
    # The data position, advanced by every draw: a ``TaskSampler`` (its cursor: epoch, position,
    # drawn) or the multi-domain schedule (mixture counts, curriculum estimates, reward
    # normaliser statistics, seesaw baseline). Its ``state`` is the part that is saved.
    sampler: TaskSampler | DomainSchedule
    step: int = 0  # steps taken, trained or skipped; the next one is ``step + 1``
    draws: int = 0  # prompts drawn by the steps taken, refills included: the prompt ledger's length
    # A copy of ``sampler.state`` as of the last step taken. An async run samples ahead of its
    # steps; its checkpoints keep this cursor, so a resumed run draws untrained batches again.
    trained_cursor: Any = None
    policy_version: int = 0  # updates the weights have had; every sample is tagged with it
    trajectory_parts: int = 0  # parts the steps taken added to the trajectory store (0 without one)

    def __post_init__(self) -> None:
        if self.trained_cursor is None:
            self.trained_cursor = copy.deepcopy(self.sampler.state)

    @classmethod
    def start(
        cls, parameters: Sequence[torch.nn.Parameter], optim: OptimSection, sampler: TaskSampler | DomainSchedule
    ) -> RunState:
        """A new run's state at step 0: AdamW over ``parameters`` with ``optim``'s settings, its
        learning rate warmed up linearly over ``optim.warmup_steps`` optimizer steps, and ``sampler``."""
        # The fused kernel (one pass over all parameters) where torch has it: 6x faster on CPU.
        fused = all(p.is_floating_point() and p.device.type in ("cpu", "cuda") for p in parameters)
        optimizer = torch.optim.AdamW(parameters, lr=optim.lr, weight_decay=optim.weight_decay, fused=fused)
        warmup = max(optim.warmup_steps, 1)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / warmup))
        return cls(optimizer, scheduler, sampler)

    def state_dict(
        self, optimizer_state: dict[str, Any] | None = None, *, sampled_ahead: bool = False
    ) -> dict[str, Any]:
        """The record as plain data, under ``SAVED_KEYS`` (counters under "extra"), with the RNG states.

        ``optimizer_state``: the optimizer's ``state_dict`` as one process holds it (a sharded run
        gathers it first); by default ``optimizer.state_dict()``. ``sampled_ahead``: the sampler
        has drawn past the last step taken (async), so the data position saved is
        ``trained_cursor``; otherwise it is the sampler's own state.
        """
        cursor = self.trained_cursor if sampled_ahead else self.sampler.state
        return {
            "step": self.step,
            "optimizer": self.optimizer.state_dict() if optimizer_state is None else optimizer_state,
            "scheduler": self.scheduler.state_dict(),
            "rng": rng_state(),
            "sampler": dataclasses.asdict(cursor),
            "extra": {
                "policy_version": self.policy_version,
                "draws": self.draws,
                "trajectory_parts": self.trajectory_parts,
            },
        }

    def load_state_dict(
        self,
        saved: dict[str, Any],
        source: str | Path,
        load_optimizer: Callable[[torch.optim.Optimizer, dict[str, Any]], None] | None = None,
    ) -> None:
        """Continue from ``saved`` (a ``state_dict``, read from ``source``): every field, and the RNGs.

        ``load_optimizer(optimizer, state)`` loads the optimizer's saved state (a sharded run cuts
        it into its shards); by default ``optimizer.load_state_dict``. Raises ``UserError`` when
        ``saved`` lacks a part of the record or holds another kind of data position.
        """
        extra = saved.get("extra")
        missing = [key for key in SAVED_KEYS if key not in saved] + [
            f"extra.{key}" for key in SAVED_COUNTERS if not isinstance(extra, dict) or key not in extra
        ]
        if missing:
            raise UserError(
                f"{source}: not a complete RL checkpoint (it lacks {', '.join(missing)}); "
                "resume from a checkpoint this version wrote, or use another run.out"
            )
        try:  # first: a data position of another kind is refused before anything else moves
            self.sampler.load_state(saved["sampler"])
        except UserError as error:
            raise UserError(f"{source}: {error}") from None
        if load_optimizer is None:
            self.optimizer.load_state_dict(saved["optimizer"])
        else:
            load_optimizer(self.optimizer, saved["optimizer"])
        self.scheduler.load_state_dict(saved["scheduler"])
        set_rng_state(saved["rng"])
        self.trained_cursor = copy.deepcopy(self.sampler.state)
        self.step = saved["step"]
        self.policy_version = extra["policy_version"]
        self.draws = extra["draws"]
        self.trajectory_parts = extra["trajectory_parts"]
