"""The RL run's state record (``RunState``) leaves through a checkpoint and comes back whole."""

import ast
import copy
import dataclasses
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from veriloop.core import Task, UserError
from veriloop.scheduling import DomainSchedule, ScheduleConfig
from veriloop.training._checkpoint import load_trainer_state
from veriloop.training._config import OptimSection
from veriloop.training._data import TaskSampler
from veriloop.training._distributed import SingleProcess
from veriloop.training._parallel_strategy import Replicated
from veriloop.training._rl_checkpoint import RLCheckpoints
from veriloop.training._run_state import SAVED_COUNTERS, SAVED_KEYS, RunState


def _tasks(domain: str, count: int) -> list[Task]:
    verifier = {"kind": "regex", "pattern": r"\d", "mode": "search"}
    return [Task(id=f"{domain}/{i}", domain=domain, prompt=f"Say {i}.", verifier=verifier) for i in range(count)]


class _Saved:
    """Stands in for a model and its tokenizer: ``save_pretrained`` writes a marker."""

    def save_pretrained(self, directory: Path, state_dict=None) -> None:
        Path(directory).mkdir(parents=True, exist_ok=True)
        (Path(directory) / "marker").write_text("weights")


def _sampler(kind: str, out: Path):
    if kind == "tasks":
        return TaskSampler(_tasks("digits", 5), seed=3)
    return DomainSchedule(_tasks("a", 4) + _tasks("b", 6), ScheduleConfig(curriculum=True), seed=3, out=out)


def _new_state(kind: str, out: Path) -> RunState:
    torch.manual_seed(0)
    parameters = list(torch.nn.Linear(3, 2).parameters())
    return RunState.start(parameters, OptimSection(lr=1e-2, warmup_steps=4), _sampler(kind, out))


def _advance(state: RunState) -> None:
    """Two steps' worth of change to every field."""
    for _ in range(2):
        state.optimizer.zero_grad()
        loss = sum((p**2).sum() for group in state.optimizer.param_groups for p in group["params"])
        loss.backward()
        state.optimizer.step()
        state.scheduler.step()
        state.sampler.next(3)
    state.trained_cursor = copy.deepcopy(state.sampler.state)
    state.step, state.draws, state.policy_version, state.trajectory_parts = 2, 6, 2, 1


def _optimizer_equal(a: torch.optim.Optimizer, b: torch.optim.Optimizer) -> bool:
    first, second = a.state_dict(), b.state_dict()
    if first["param_groups"] != second["param_groups"] or first["state"].keys() != second["state"].keys():
        return False
    return all(
        torch.equal(first["state"][i][name], second["state"][i][name])
        for i in first["state"]
        for name in first["state"][i]
    )


# How each field of the record is compared; a field missing here fails the round-trip test,
# so a field added to RunState must be added here (and to what it saves).
FIELD_EQUAL = {
    "optimizer": _optimizer_equal,
    "scheduler": lambda a, b: a.state_dict() == b.state_dict(),
    "sampler": lambda a, b: dataclasses.asdict(a.state) == dataclasses.asdict(b.state),
    "step": lambda a, b: a == b,
    "draws": lambda a, b: a == b,
    "trained_cursor": lambda a, b: dataclasses.asdict(a) == dataclasses.asdict(b),
    "policy_version": lambda a, b: a == b,
    "trajectory_parts": lambda a, b: a == b,
}


def _save(state: RunState, root: Path, sampled_ahead: bool = False) -> Path:
    parallel = Replicated(SingleProcess(), None, "cpu")
    return RLCheckpoints(root, keep=2, sampled_ahead=sampled_ahead).save(state, _Saved(), _Saved(), parallel)


@pytest.mark.parametrize("kind", ["tasks", "schedule"])
def test_every_field_of_the_record_round_trips_through_a_checkpoint(tmp_path, kind):
    assert set(FIELD_EQUAL) == {field.name for field in dataclasses.fields(RunState)}
    saved = _new_state(kind, tmp_path)
    _advance(saved)
    checkpoint = _save(saved, tmp_path / "checkpoints")
    assert checkpoint.name == "step-00000002" and (checkpoint / "model" / "marker").is_file()
    after_save = (random.random(), np.random.rand(), torch.rand(2))

    restored = _new_state(kind, tmp_path)
    assert not FIELD_EQUAL["optimizer"](saved.optimizer, restored.optimizer)  # a fresh record differs
    restored.load_state_dict(load_trainer_state(checkpoint), checkpoint)
    for field in dataclasses.fields(RunState):
        assert FIELD_EQUAL[field.name](getattr(saved, field.name), getattr(restored, field.name)), field.name
    after_load = (random.random(), np.random.rand(), torch.rand(2))  # the RNGs are restored too
    assert after_load[:2] == after_save[:2] and torch.equal(after_load[2], after_save[2])
    assert [t.id for t in saved.sampler.next(4)] == [t.id for t in restored.sampler.next(4)]


def test_a_run_that_samples_ahead_saves_the_last_trained_steps_cursor(tmp_path):
    state = _new_state("tasks", tmp_path)
    _advance(state)
    trained = copy.deepcopy(state.sampler.state)
    state.sampler.next(2)  # drawn for a step not yet trained
    checkpoint = _save(state, tmp_path / "checkpoints", sampled_ahead=True)
    restored = _new_state("tasks", tmp_path)
    restored.load_state_dict(load_trainer_state(checkpoint), checkpoint)
    assert restored.sampler.state == trained and restored.trained_cursor == trained


@pytest.mark.parametrize("missing", [*SAVED_KEYS, *(f"extra.{key}" for key in SAVED_COUNTERS)])
def test_a_checkpoint_missing_part_of_the_record_is_refused_in_one_line(tmp_path, missing):
    state = _new_state("tasks", tmp_path)
    _advance(state)
    checkpoint = _save(state, tmp_path / "checkpoints")
    saved = load_trainer_state(checkpoint)
    if missing.startswith("extra."):
        del saved["extra"][missing.removeprefix("extra.")]
    else:
        del saved[missing]
    restored = _new_state("tasks", tmp_path)
    with pytest.raises(UserError) as error:
        restored.load_state_dict(saved, checkpoint)
    message = str(error.value)
    assert "\n" not in message and str(checkpoint) in message and missing in message
    assert restored.step == 0 and not restored.optimizer.state  # nothing half-restored


def test_a_checkpoint_of_another_data_position_is_refused_in_one_line(tmp_path):
    scheduled = _new_state("schedule", tmp_path)
    checkpoint = _save(scheduled, tmp_path / "checkpoints")
    plain = _new_state("tasks", tmp_path)
    with pytest.raises(UserError, match="schedule section") as error:
        plain.load_state_dict(load_trainer_state(checkpoint), checkpoint)
    assert "\n" not in str(error.value) and str(checkpoint) in str(error.value)
    assert plain.step == 0


def test_checkpointing_does_not_import_the_trainer():
    source = Path(__file__).parents[2] / "src" / "veriloop" / "training" / "_rl_checkpoint.py"
    imported = {node.module for node in ast.walk(ast.parse(source.read_text())) if isinstance(node, ast.ImportFrom)}
    assert "veriloop.training._rl" not in imported
