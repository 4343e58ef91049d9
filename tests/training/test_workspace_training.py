"""RL on terminal-coding tasks: episodes start from the task's workspace on its environment,
tools run there, the final workspace is judged and kept as a scene."""

from __future__ import annotations

import json

import pytest

from veriloop.core import Task

pytestmark = pytest.mark.e2e

OPS = "def add(a, b):\n    return a - b\n"
HIDDEN = {
    "tests/test_hidden.py": "from calc.ops import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\ndef test_zero():\n    assert add(0, 0) == 0\n"
}


def test_two_steps_on_workspace_tasks_with_the_tiny_model(make_config, env_with_pytest, tmp_path):
    from veriloop.evaluation import find_scene, replay_scene
    from veriloop.rollout import TrajectoryStore
    from veriloop.training import RLTrainer

    tasks = [
        Task(
            id=f"calc{i}",
            domain="terminal",
            prompt=f"Fix calc/ops.py ({i}); use <run_shell>...</run_shell>.",
            verifier={"kind": "workspace_tests", "files": HIDDEN},
            environment="pytest",
            workspace={"calc/__init__.py": "", "calc/ops.py": OPS},
        )
        for i in range(2)
    ]
    config = make_config(
        rollout={"prompts_per_step": 2, "group_size": 2, "max_tokens": 8, "max_turns": 2, "tools": ("shell", "submit")},
        algorithm={"dynamic_sampling": False},  # the tiny model fixes nothing: every group's rewards are equal
        run={"steps": 2, "save_trajectories": True},
    )
    trainer = RLTrainer(config, tasks=tasks)
    try:
        history = trainer.train()
    finally:
        trainer.close()
    assert len(history) == 2
    out = config.run.out
    stored = list(TrajectoryStore(f"{out}/trajectories"))
    assert len(stored) == 8 and all(t.environment == env_with_pytest.hash for t in stored)
    assert all(t.reward == 0.5 for t in stored)  # the unfixed workspace: one hidden test of two
    failed = stored[0]
    assert failed.scene is not None
    (tmp_path / "tasks.jsonl").write_text("".join(json.dumps(t.model_dump(mode="json")) + "\n" for t in tasks))
    scene = find_scene(out, failed.id, [str(tmp_path / "tasks.jsonl")])
    assert replay_scene(scene).reward == failed.reward


def test_a_resumed_run_refuses_another_build_of_its_environments(make_config, tmp_path):
    import pytest

    from veriloop.core import UserError
    from veriloop.training._run_config import check_and_save_environments

    config = make_config()
    out = tmp_path / "run"
    check_and_save_environments(out, {"pytest": "a" * 64}, config, resuming=False)
    check_and_save_environments(out, {"pytest": "a" * 64}, config, resuming=True)
    with pytest.raises(UserError, match="other builds of its environments"):
        check_and_save_environments(out, {"pytest": "b" * 64}, config, resuming=True)
    allowed = make_config(run={"resume_changes": ["environments"]})
    check_and_save_environments(out, {"pytest": "b" * 64}, allowed, resuming=True)
    assert json.loads((out / "environments.json").read_text()) == {"pytest": "b" * 64}


def test_the_tiny_model_trains_two_steps_on_the_terminal_coding_example(make_config, env_with_pytest):
    from pathlib import Path

    from veriloop.tasks import load_tasks
    from veriloop.training import RLTrainer

    example = Path(__file__).resolve().parents[2] / "examples" / "terminal_coding" / "tasks.jsonl"
    config = make_config(
        rollout={"prompts_per_step": 2, "group_size": 2, "max_tokens": 8, "max_turns": 2, "tools": ("shell", "submit")},
        algorithm={"dynamic_sampling": False},
        run={"steps": 2},
    )
    trainer = RLTrainer(config, tasks=load_tasks(example))
    try:
        history = trainer.train()
    finally:
        trainer.close()
    assert len(history) == 2 and not any(step.get("skipped") for step in history), history
