import pytest

from veriloop.core import Task


def _digit_tasks() -> list[Task]:
    """A task a random tiny model solves sometimes: write any digit (so RL has signal)."""
    return [
        Task(
            id=f"d{i}",
            domain="format",
            prompt=f"Write a digit, {i}.",
            verifier={"kind": "regex", "pattern": r"\d", "mode": "search"},
        )
        for i in range(16)
    ]


@pytest.fixture
def digit_tasks():
    return _digit_tasks()


@pytest.fixture(scope="session")
def new_digit_tasks():
    """``new_digit_tasks()``: the digit tasks, for fixtures wider than one test."""
    return _digit_tasks


@pytest.fixture(scope="session")
def make_config_in(tiny_model_dir):
    """``make_config_in(directory)``: ``make_config`` with its runs under ``directory``, for fixtures
    wider than one test."""
    from veriloop.training import TrainConfig

    def maker(directory):
        def make(name: str = "run", **sections):
            data = {
                "model": {"path": str(tiny_model_dir)},
                "rollout": {"prompts_per_step": 4, "group_size": 8, "max_tokens": 12},
                "optim": {"lr": 2e-3, "warmup_steps": 1},
                "run": {
                    "steps": 3,
                    "out": str(directory / name),
                    "checkpoint_every": 0,
                    "loggers": ["jsonl"],
                    "progress": False,
                },
            }
            for section, fields in sections.items():
                data.setdefault(section, {}).update(fields)
            return TrainConfig.model_validate(data)

        return make

    return maker


@pytest.fixture
def make_config(make_config_in, tmp_path):
    """``make_config(name, **sections)``: a TrainConfig on the tiny model, its run under ``tmp_path / name``."""
    return make_config_in(tmp_path)


@pytest.fixture(scope="session")
def write_config_file(tiny_model_dir):
    """``write_config_file(directory, **sections)``: a YAML training config on the digit tasks (written
    as a task file) in ``directory``, for CLI runs; for fixtures wider than one test."""
    import yaml

    from veriloop.core import write_jsonl

    def write(directory, **sections):
        tasks = directory / "tasks.jsonl"
        write_jsonl(tasks, _digit_tasks())
        data = {
            "model": {"path": str(tiny_model_dir)},
            "data": {"train": str(tasks)},
            "rollout": {"group_size": 4, "max_tokens": 8},
            "optim": {"lr": 2e-3},
            "run": {"keep_checkpoints": 10, "loggers": ["jsonl"], "progress": False},
        }
        for section, fields in sections.items():
            data.setdefault(section, {}).update(fields)
        path = directory / "config.yaml"
        path.write_text(yaml.safe_dump(data))
        return path

    return write


@pytest.fixture
def config_file(tmp_path, write_config_file):
    """A YAML training config on the digit tasks (written as a task file), for CLI runs."""

    def write(**sections):
        return write_config_file(tmp_path, **sections)

    return write


PLUGIN_SOURCE = '''"""A verifier kind and an advantage estimator from outside the package."""
import os

from veriloop.algorithms import ADVANTAGE_ESTIMATORS
from veriloop.verifiers import Verdict, VerifierConfig, register_verifier


class HasDigit(VerifierConfig):
    digits: str = "0123456789"


@register_verifier("has_digit_plugin", HasDigit)
def check(config, task, text):
    found = any(character in text for character in config.digits)
    return Verdict(reward=float(found), passed=found, detail=f"has_digit_plugin in process {os.getpid()}")


@ADVANTAGE_ESTIMATORS.register("centred_plugin")
def centred(rewards, group_size, eps=1e-6):
    grouped = rewards.view(-1, group_size)
    return (grouped - grouped.mean(dim=1, keepdim=True)).view(-1)
'''


@pytest.fixture
def plugin_config(tmp_path, tiny_model_dir):
    """A config directory whose tasks use a verifier kind that only its plugin file registers."""
    import yaml

    from veriloop.core import write_jsonl

    project = tmp_path / "project"
    project.mkdir()
    (project / "my_kinds.py").write_text(PLUGIN_SOURCE)
    tasks = [
        Task(id=f"p{i}", domain="format", prompt=f"Write a digit, {i}.", verifier={"kind": "has_digit_plugin"})
        for i in range(8)
    ]
    write_jsonl(project / "tasks.jsonl", tasks)
    data = {
        "plugins": ["my_kinds.py"],  # relative to the config file, not to where the command runs
        "model": {"path": str(tiny_model_dir)},
        "data": {"train": str(project / "tasks.jsonl")},
        "rollout": {"prompts_per_step": 2, "group_size": 4, "max_tokens": 8},
        "algorithm": {"advantage": "centred_plugin"},
        "optim": {"lr": 2e-3, "warmup_steps": 1},
        "run": {"steps": 2, "checkpoint_every": 0, "loggers": ["jsonl"], "progress": False},
    }
    path = project / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture
def shrunken_seed_loop(run_cli):
    """Run ``veriloop quickstart --recipe seed-loop`` with tiny sizes (``settings`` override
    them) and return its summary, after checking the run succeeded, that ``expected`` are the
    summary's domains, each with base and final pass@1 and a gain inside its interval, and that
    no training task was held out."""
    import json

    def run(out, expected, **settings):
        sizes = {"sft_steps": 4, "rl_steps": 2, "group_size": 2, "seesaw_samples": 1, "eval_samples": 1}
        chosen = {"out": out, **sizes, **settings}
        result = run_cli("quickstart", "--recipe", "seed-loop", *(f"{k}={v}" for k, v in chosen.items()), timeout=900)
        assert result.returncode == 0, result.stderr
        summary = json.loads((out / "summary.json").read_text())
        assert set(summary["heldout_pass@1"]) == set(expected)
        for block in summary["heldout_pass@1"].values():
            assert 0.0 <= block["base"] <= 1.0 and 0.0 <= block["final"] <= 1.0
            assert block["gain_ci_points"][0] <= block["gain_points"] <= block["gain_ci_points"][1]
        assert {s["overlapping_heldout_tasks"] for s in summary["splits"].values()} == {0}
        return summary

    return run
