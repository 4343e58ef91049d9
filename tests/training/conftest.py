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


@pytest.fixture
def config_file(tmp_path, tiny_model_dir, digit_tasks):
    """A YAML training config on the digit tasks (written as a task file), for CLI runs."""
    import yaml

    from veriloop.core import write_jsonl

    def write(**sections):
        tasks = tmp_path / "tasks.jsonl"
        write_jsonl(tasks, digit_tasks)
        data = {
            "model": {"path": str(tiny_model_dir)},
            "data": {"train": str(tasks)},
            "rollout": {"group_size": 4, "max_tokens": 8},
            "optim": {"lr": 2e-3},
            "run": {"keep_checkpoints": 10, "loggers": ["jsonl"], "progress": False},
        }
        for section, fields in sections.items():
            data.setdefault(section, {}).update(fields)
        path = tmp_path / "config.yaml"
        path.write_text(yaml.safe_dump(data))
        return path

    return write
