"""``veriloop verify --rescore`` on a training run: its stored trajectories judged again with the
task file its train_config.json names, the run directory left byte for byte as it was."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from veriloop.core import write_jsonl

pytestmark = pytest.mark.e2e


def _fingerprint(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*") if p.is_file()
    }


def test_a_training_run_is_rescored_from_its_own_task_file(make_config, digit_tasks, tmp_path, run_cli):
    from veriloop.evaluation import rescore_run
    from veriloop.rollout import TrajectoryStore
    from veriloop.training import RLTrainer

    tasks = tmp_path / "tasks.jsonl"
    write_jsonl(tasks, digit_tasks)
    config = make_config(
        data={"train": str(tasks)},
        rollout={"prompts_per_step": 2, "group_size": 4, "max_tokens": 6},
        algorithm={"dynamic_sampling": False},
        run={"steps": 1},
    )
    trainer = RLTrainer(config)
    try:
        trainer.train()
    finally:
        trainer.close()
    run = Path(config.run.out)
    stored = list(TrajectoryStore(run / "trajectories"))
    assert len(stored) == 8
    before = _fingerprint(run)

    done = run_cli("verify", "--rescore", str(run), "--out", str(tmp_path / "same"))
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "same" / "rescore.json").read_text())
    assert (report["run_kind"], report["rescored"], report["flips"]) == ("training", 8, [])
    assert report["task_files"] == [str(tasks)] and report["task_set_hash"]["run"] is None
    passed = {t.id for t in stored if t.score.passed}
    assert report["overall"]["before"]["passed"] == report["overall"]["after"]["passed"] == len(passed)

    flips = {}
    for name, pattern in (("anything", "(?s).*"), ("nothing", "(?!)")):
        changed = [t.model_copy(update={"verifier": {"kind": "regex", "pattern": pattern}}) for t in digit_tasks]
        write_jsonl(tasks, changed)
        rescored, scores = rescore_run(run)
        flips[name] = {flip.id for flip in rescored.flips}
        assert [s.id for s in scores] == [t.id for t in stored]
    assert flips["anything"] == {t.id for t in stored} - passed  # every failure passes now
    assert flips["nothing"] == passed  # every pass fails now
    assert _fingerprint(run) == before
