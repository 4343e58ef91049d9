import pytest

from veriloop.core import Task


@pytest.fixture
def digit_tasks():
    """A task a random tiny model solves sometimes: write any digit (so RL has signal)."""
    return [
        Task(id=f"d{i}", domain="format", prompt=f"Write a digit, {i}.", verifier={"kind": "regex", "pattern": r"\d", "mode": "search"})
        for i in range(16)
    ]


@pytest.fixture
def make_config(tiny_model_dir, tmp_path):
    from veriloop.training import TrainConfig

    def make(name: str = "run", **sections):
        data = {
            "model": {"path": str(tiny_model_dir)},
            "rollout": {"prompts_per_step": 4, "group_size": 8, "max_tokens": 12},
            "optim": {"lr": 2e-3, "warmup_steps": 1},
            "run": {"steps": 3, "out": str(tmp_path / name), "checkpoint_every": 0, "loggers": ["jsonl"], "progress": False},
        }
        for section, fields in sections.items():
            data.setdefault(section, {}).update(fields)
        return TrainConfig.model_validate(data)

    return make
