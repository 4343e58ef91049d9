import signal
import subprocess
import sys
import time

import pytest
import torch

pytestmark = pytest.mark.e2e


@pytest.mark.determinism
def test_a_killed_run_resumes_and_reproduces_the_next_steps(tmp_path, config_file):
    """Bit for bit: a resumed run restores weights, optimizer, RNG and sampler and repeats the same
    operations in the same shapes, so it must write the checkpoints the uninterrupted run wrote."""
    from veriloop.training import read_metrics

    path = config_file(
        rollout={"prompts_per_step": 2}, optim={"warmup_steps": 2}, run={"steps": 4, "checkpoint_every": 1}
    )
    veriloop = [sys.executable, "-m", "veriloop.cli._entry"]

    straight = subprocess.run(
        [*veriloop, "train", str(path), f"run.out={tmp_path / 'straight'}"], capture_output=True, text=True, timeout=600
    )
    assert straight.returncode == 0, straight.stderr

    killed_out = tmp_path / "killed"
    process = subprocess.Popen(
        [*veriloop, "train", str(path), f"run.out={killed_out}", "run.steps=1000"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 300
    while not (killed_out / "checkpoints" / "step-00000001").exists() and time.time() < deadline:
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    resumed = subprocess.run(
        [*veriloop, "train", str(path), f"run.out={killed_out}"], capture_output=True, text=True, timeout=600
    )
    assert resumed.returncode == 0, resumed.stderr

    from safetensors.torch import load_file

    for step in range(2, 5):
        name = f"step-{step:08d}/model/model.safetensors"
        first = load_file(tmp_path / "straight" / "checkpoints" / name)
        second = load_file(killed_out / "checkpoints" / name)
        assert all(torch.equal(first[k], second[k]) for k in first), step
    assert [r["step"] for r in read_metrics(killed_out)] == [1, 2, 3, 4]
    assert [r["reward/sampled_mean"] for r in read_metrics(killed_out)] == [
        r["reward/sampled_mean"] for r in read_metrics(tmp_path / "straight")
    ]
    from veriloop.training._ledger import ledger_summary, read_ledger

    assert read_ledger(killed_out) == read_ledger(tmp_path / "straight")  # each prompt accounted for once
    from veriloop.rollout import TrajectoryStore

    # What the killed run stored after its last checkpoint was rolled back with the steps.
    kept = [(t.task_id, t.sample_index, t.policy_version) for t in TrajectoryStore(killed_out / "trajectories")]
    assert kept == [
        (t.task_id, t.sample_index, t.policy_version) for t in TrajectoryStore(tmp_path / "straight" / "trajectories")
    ]
    assert ledger_summary(read_ledger(killed_out))["exactly_once"]
