"""Resumable checkpoints: weights, optimizer, scheduler, every RNG, the data cursor.

A checkpoint is a directory ``step-NNNNNNNN`` written under a temporary name and renamed
when complete, so a run killed while saving leaves the previous checkpoint intact.
"""

from __future__ import annotations

import dataclasses
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

from veriloop.training._data import SamplerState


def rng_state() -> dict[str, Any]:
    """The process's generators: Python's, NumPy's, torch's (CPU), and every CUDA device's."""
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(
    root: Path,
    step: int,
    model: Any,
    tokenizer: Any,
    optimizer_state: dict[str, Any],
    scheduler: Any,
    sampler_state: SamplerState | dict[str, Any],
    extra: dict[str, Any],
    keep: int,
    model_state: dict[str, Any] | None = None,
) -> Path:
    """Write ``root/step-NNNNNNNN`` atomically and prune older ones beyond ``keep`` (the SFT
    trainer's; the RL trainer writes its ``RunState.state_dict()``, same keys, with ``write_checkpoint``).

    ``sampler_state`` is the data cursor (the RL sampler's, or any dict of plain values).
    ``optimizer_state`` is the optimizer's ``state_dict`` as one process holds it (whole tensors);
    ``model_state``, when given, the weights to save in place of ``model.state_dict()``.
    """
    trainer_state = {
        "step": step,
        "optimizer": optimizer_state,
        "scheduler": scheduler.state_dict(),
        "rng": rng_state(),
        "sampler": sampler_state if isinstance(sampler_state, dict) else dataclasses.asdict(sampler_state),
        "extra": extra,
    }
    return write_checkpoint(root, step, model, tokenizer, trainer_state, keep, model_state)


def write_checkpoint(
    root: Path,
    step: int,
    model: Any,
    tokenizer: Any,
    trainer_state: dict[str, Any],
    keep: int,
    model_state: dict[str, Any] | None = None,
) -> Path:
    """Write ``root/step-NNNNNNNN`` (the model, and ``trainer_state`` as ``trainer_state.pt``)
    atomically, and prune older ones beyond ``keep``."""
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step-{step:08d}"
    staging = root / f".step-{step:08d}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    model.save_pretrained(staging / "model", state_dict=model_state)
    tokenizer.save_pretrained(staging / "model")
    torch.save(trainer_state, staging / "trainer_state.pt")
    shutil.rmtree(final, ignore_errors=True)
    staging.rename(final)
    for old in list_checkpoints(root)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def list_checkpoints(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    return sorted(
        p for p in root.iterdir() if p.is_dir() and p.name.startswith("step-") and (p / "trainer_state.pt").exists()
    )


def load_trainer_state(checkpoint: Path) -> dict[str, Any]:
    return torch.load(checkpoint / "trainer_state.pt", weights_only=False)
