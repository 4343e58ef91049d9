"""What an RL run keeps between processes: its checkpoint, written and resumed.

A checkpoint holds the weights, the optimizer and scheduler, every RNG, the data cursor (of the
last *trained* step, so an async run draws its untrained batches again), the policy version,
the prompt ledger's length and the number of trajectory parts kept. Resuming rolls the ledger,
the metrics and the trajectory store back to the checkpoint's step.
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from veriloop.core import UserError
from veriloop.training._checkpoint import load_trainer_state, save_checkpoint, set_rng_state
from veriloop.training._data import SamplerState, TaskSampler

if TYPE_CHECKING:
    from veriloop.training._rl import RLTrainer


def save_rl_checkpoint(trainer: RLTrainer) -> Path | None:
    """Write the trainer's checkpoint (rank 0 only, the optimizer state gathered whole; None on the others)."""
    optimizer_state = trainer.parallel.optimizer_state(trainer.optimizer)  # fsdp: a collective
    if not trainer.ranks.is_main:
        return None
    # In async mode the sampler has run ahead; the checkpoint keeps the cursor of the last
    # trained step, so a resumed run draws the prompts of untrained batches again.
    async_mode = trainer.config.pipeline.mode == "async"
    sampler_state = trainer.trained_sampler_state if async_mode else trainer.sampler.state
    with trainer.heartbeats.phase("checkpoint", f"step {trainer.step_index}: saving"):
        return save_checkpoint(
            trainer.checkpoint_dir,
            trainer.step_index,
            trainer.model,
            trainer.tokenizer,
            optimizer_state,
            trainer.scheduler,
            sampler_state,
            {
                "policy_version": trainer.version,
                "draws": trainer.draws,
                "trajectory_parts": len(trainer.store.parts()) if trainer.store is not None else 0,
            },
            trainer.config.run.keep_checkpoints,
            trainer.parallel.model_state(trainer.model),
        )


def resume_rl(trainer: RLTrainer, checkpoint: Path) -> None:
    """Restore the trainer's state from ``checkpoint`` (its weights are already loaded)."""
    state = load_trainer_state(checkpoint)
    trainer.parallel.load_optimizer_state(trainer.optimizer, state["optimizer"])
    trainer.scheduler.load_state_dict(state["scheduler"])
    set_rng_state(state["rng"])
    if trainer.schedule is not None:
        trainer.schedule.load_state(state["sampler"])
    else:
        fields = {f.name for f in dataclasses.fields(SamplerState)}
        if set(state["sampler"]) != fields:
            raise UserError(f"{checkpoint}: saved by a run with a schedule section; resume it with the same config")
        trainer.sampler = TaskSampler(trainer.tasks, trainer.config.run.seed, SamplerState(**state["sampler"]))
    trainer.trained_sampler_state = copy.deepcopy(trainer.sampler.state)
    trainer.step_index = state["step"]
    trainer.engine.policy_version = state["extra"]["policy_version"]
    trainer.draws = state["extra"].get("draws", 0)
    trainer.ledger.truncate(trainer.draws)
    trainer.metrics.truncate_after(trainer.step_index)
    if trainer.store is not None and "trajectory_parts" in state["extra"]:
        trainer.store.keep_parts(state["extra"]["trajectory_parts"])  # the rolled-back steps' trajectories go
