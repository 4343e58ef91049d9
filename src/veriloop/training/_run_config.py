"""The resolved config of a run, kept in ``OUT/train_config.json``, so a resume cannot mix two configs.

A fresh run writes it; a resumed run compares its own config with it field by field and
refuses any difference outside ``ALWAYS_CHANGEABLE`` (how long to run, how to report) unless
``run.resume_changes`` names the field. The saved copy is then updated, so the next resume
compares with what actually ran last.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from veriloop.core import UserError, atomic_write
from veriloop.training._config import TrainConfig

CONFIG_FILE = "train_config.json"
ENVIRONMENTS_FILE = "environments.json"  # name -> hash of each environment the run's tasks name
ALWAYS_CHANGEABLE = frozenset(
    {
        "run.out",
        "run.steps",
        "run.progress",
        "run.loggers",
        "run.eval_every",
        "run.eval_samples",
        "run.checkpoint_every",
        "run.keep_checkpoints",
        "run.resume_changes",
        "pipeline.stall_after_s",
        "pipeline.torch_threads",
        # How many ranks train and how they are started: a checkpoint resumes at any world size.
        "distributed.strategy",
        "distributed.ray_ranks",
        "distributed.rank_cpus",
        "distributed.rank_gpus",
        "distributed.timeout_s",
        "distributed.lost_after_s",
    }
)


def _flat(config: dict[str, Any], model: type[BaseModel] = TrainConfig, prefix: str = "") -> dict[str, Any]:
    """``{"optim": {"lr": 1e-4}}`` -> ``{"optim.lr": 1e-4}``: sections, and groups of fields inside them
    (``algorithm.correction.mode``), by the config's own models; dict-valued settings stay whole."""
    flat: dict[str, Any] = {}
    for key, value in config.items():
        field = model.model_fields.get(key)
        inner = field.annotation if field is not None else None
        if isinstance(value, dict) and isinstance(inner, type) and issubclass(inner, BaseModel):
            flat.update(_flat(value, inner, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _with_defaults(saved: dict[str, Any]) -> dict[str, Any]:
    """A saved config with the settings added since it was written at their defaults, so a run
    begun by an earlier release resumes (a setting that was changed still differs)."""
    from pydantic import ValidationError

    try:
        return json.loads(TrainConfig.model_validate(saved).model_dump_json())
    except ValidationError:
        return saved


def check_and_save_run_config(out: Path, config: TrainConfig, resuming: bool, save: bool = True) -> None:
    """On resume, raise a UserError naming every changed field not allowed to change; then save
    (unless ``save`` is False: a data-parallel rank other than 0 only checks)."""
    path = out / CONFIG_FILE
    now = json.loads(config.model_dump_json())
    if resuming and path.is_file():
        saved = _flat(_with_defaults(json.loads(path.read_text(encoding="utf-8"))))
        current = _flat(now)
        allowed = ALWAYS_CHANGEABLE | set(config.run.resume_changes)
        changed = [
            f"{key}: {saved.get(key)!r} -> {current.get(key)!r}"
            for key in sorted(set(saved) | set(current))
            if key not in allowed and saved.get(key) != current.get(key)
        ]
        if changed:
            raise UserError(
                f"{out}: resuming with a config that differs from the run's ({'; '.join(changed)}); "
                "restore those settings, use another run.out, or allow them with run.resume_changes=[FIELD,...]"
            )
    if save:
        _save(path, now)


def check_and_save_environments(
    out: Path, environments: dict[str, str], config: TrainConfig, resuming: bool, save: bool = True
) -> None:
    """On resume, a UserError when an environment of the run's tasks is another build than the
    one the run began with (unless ``run.resume_changes`` holds ``environments``); then save
    (unless ``save`` is False)."""
    path = out / ENVIRONMENTS_FILE
    if resuming and path.is_file() and "environments" not in config.run.resume_changes:
        saved = json.loads(path.read_text(encoding="utf-8"))
        changed = [f"{n}: {saved[n][:12]} -> {h[:12]}" for n, h in sorted(environments.items()) if saved.get(n, h) != h]
        if changed:
            raise UserError(
                f"{out}: the run began on other builds of its environments ({'; '.join(changed)}); rebuild "
                "them as they were, use another run.out, or allow it with run.resume_changes=[environments]"
            )
    if save:
        _save(path, environments)


def _save(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path) as handle:
        json.dump(data, handle, indent=2)
