"""What an RL run keeps between processes: its checkpoint, written and resumed.

A checkpoint is the model's weights and the run's state record (``RunState``, ``_run_state.py``):
the optimizer and scheduler, every RNG, the data position (of the last *trained* step in async
mode, so a resumed run draws its untrained batches again), the policy version, the prompt
ledger's length and the number of trajectory parts kept. Resuming restores the record whole,
then rolls the ledger, the metrics and the trajectory store back to its step.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from veriloop.rollout import TrajectoryStore
from veriloop.training._checkpoint import list_checkpoints, load_trainer_state, write_checkpoint
from veriloop.training._config import TrainConfig
from veriloop.training._ledger import PromptLedger
from veriloop.training._metrics import MetricsLogger
from veriloop.training._run_state import RunState


@dataclass(frozen=True)
class RLCheckpoints:
    """Where an RL run's checkpoints go, how many are kept, and which data position they keep."""

    root: Path
    keep: int  # the newest ``keep`` checkpoints stay; older ones are deleted
    sampled_ahead: bool  # async: the sampler runs ahead, so the last trained step's cursor is kept

    @classmethod
    def of_run(cls, config: TrainConfig) -> RLCheckpoints:
        """``run.out/checkpoints``, keeping ``run.keep_checkpoints``."""
        return cls(Path(config.run.out) / "checkpoints", config.run.keep_checkpoints, config.pipeline.mode == "async")

    def latest(self) -> Path | None:
        """The checkpoint a run resumes from: the newest complete one (None when there is none)."""
        found = list_checkpoints(self.root)
        return found[-1] if found else None

    def save(self, state: RunState, model: Any, tokenizer: Any, parallel: Any) -> Path | None:
        """Write ``root/step-NNNNNNNN``: the weights and ``state`` (rank 0 only; None on the others).

        Every rank must call it: ``parallel`` (``_parallel_strategy.py``) gathers a sharded
        optimizer's state whole first.
        """
        optimizer_state = parallel.optimizer_state(state.optimizer)  # fsdp: a collective
        if not parallel.ranks.is_main:
            return None
        saved = state.state_dict(optimizer_state, sampled_ahead=self.sampled_ahead)
        return write_checkpoint(self.root, state.step, model, tokenizer, saved, self.keep, parallel.model_state(model))


def resume_rl(
    checkpoint: Path,
    state: RunState,
    parallel: Any,
    ledger: PromptLedger,
    metrics: MetricsLogger,
    store: TrajectoryStore | None,
) -> None:
    """Restore ``state`` from ``checkpoint`` (whose weights the model already holds), then cut the
    run's logs back to its step: later draws, metrics and trajectory parts belong to steps whose
    training the interruption threw away."""
    state.load_state_dict(load_trainer_state(checkpoint), checkpoint, parallel.load_optimizer_state)
    ledger.truncate(state.draws)
    metrics.truncate_after(state.step)
    if store is not None:
        store.keep_parts(state.trajectory_parts)
