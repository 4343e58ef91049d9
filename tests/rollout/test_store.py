import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from veriloop.core import Message, Score, Trajectory, Turn
from veriloop.rollout import TrajectoryStore, preference_pairs, sft_rows


def _trajectory(i: int, passed: bool, task: str = "t") -> Trajectory:
    return Trajectory(
        id=f"x{i}",
        task_id=task,
        domain="math",
        group_id=task,
        sample_index=i,
        prompt=(Message(role="user", content="2+2?"),),
        prompt_ids=(1, 2),
        completion_ids=(3, 4, 5),
        logprobs=(-0.1, 0.0, -0.3),
        loss_mask=(1, 0, 1),
        turns=(Turn(role="assistant", text="4" if passed else "5", token_ids=(3,), logprobs=(-0.1,)),),
        response="4" if passed else "5",
        reward=float(passed),
        score=Score(id=f"x{i}", task_id=task, reward=float(passed), passed=passed),
        policy_version=i,
        timings={"generate_s": 0.5},
    )


def test_append_read_and_query(tmp_path):
    store = TrajectoryStore(tmp_path / "store")
    store.append([_trajectory(0, True), _trajectory(1, False)])
    store.append([_trajectory(2, True, task="u")])
    assert len(store) == 3 and len(store.parts()) == 2
    assert [t.id for t in store] == ["x0", "x1", "x2"]
    assert list(store)[0] == _trajectory(0, True)
    assert [t.id for t in store.query(passed=True)] == ["x0", "x2"]
    assert [t.id for t in store.query(task_id="t", min_reward=0.5)] == ["x0"]
    assert [t.id for t in store.query(policy_version=1)] == ["x1"]
    assert store.table().num_rows == 3


def test_exports(tmp_path):
    trajectories = [_trajectory(0, True), _trajectory(1, False), _trajectory(2, True, task="u")]
    rows = list(sft_rows(trajectories))
    assert [r["task_id"] for r in rows] == ["t", "u"]
    assert rows[0]["messages"] == [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]
    [pair] = preference_pairs(trajectories)
    assert pair["chosen"] == [{"role": "assistant", "content": "4"}]
    assert pair["rejected"] == [{"role": "assistant", "content": "5"}]


@pytest.mark.e2e
def test_a_writer_killed_mid_write_corrupts_nothing(tmp_path):
    """SIGKILL a process that appends large batches in a loop; every part left must be readable."""
    root = tmp_path / "store"
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        from test_store import _trajectory
        from veriloop.rollout import TrajectoryStore
        store = TrajectoryStore({str(root)!r})
        batch = [_trajectory(i, i % 2 == 0) for i in range(3000)]
        while True:
            store.append(batch)
            print("wrote", flush=True)
        """
    )
    writer = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert writer.stdout.readline().strip() == "wrote"
    time.sleep(0.3)  # kill it while it is (very likely) in the middle of the next part
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    store = TrajectoryStore(root)
    count = len(store)
    assert count >= 3000 and count % 3000 == 0
    assert sum(1 for _ in store) == count
    leftovers = [p.name for p in root.iterdir() if p not in store.parts()]
    assert all(name.endswith(".tmp") for name in leftovers)


@pytest.mark.e2e
def test_export_command(tmp_path, run_cli):
    import json

    store = TrajectoryStore(tmp_path / "store")
    store.append([_trajectory(0, True), _trajectory(1, False)])
    result = run_cli(
        "trajectories",
        "export",
        str(tmp_path / "store"),
        "--sft",
        str(tmp_path / "sft.jsonl"),
        "--pairs",
        str(tmp_path / "pairs.jsonl"),
    )
    assert result.returncode == 0, result.stderr
    [sft] = [json.loads(line) for line in (tmp_path / "sft.jsonl").read_text().splitlines()]
    assert sft["messages"][-1] == {"role": "assistant", "content": "4"}
    assert len((tmp_path / "pairs.jsonl").read_text().splitlines()) == 1
    missing = run_cli("trajectories", "export", str(tmp_path / "nope"), "--sft", str(tmp_path / "x.jsonl"))
    assert missing.returncode == 2 and "no trajectory store" in missing.stderr
