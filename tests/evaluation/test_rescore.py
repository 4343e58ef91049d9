"""``veriloop verify --rescore``: a run's stored responses judged again by the current verifiers,
the changes reported per task and domain, every flipped verdict listed, the run left untouched."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from veriloop.core import write_jsonl
from veriloop.evaluation import eval_episode_config, read_samples, rescore_run, run_eval

IMPOSSIBLE = {"kind": "exact"}  # against the gold below, which the tiny model never says
GOLD = "zebra crossing 1729"


def _tasks(verifier_of_first: dict) -> list[dict]:
    return [
        {"id": "a", "domain": "letters", "prompt": "Say something.", "verifier": verifier_of_first, "gold": GOLD},
        {"id": "b", "domain": "letters", "prompt": "Say something else.", "verifier": IMPOSSIBLE, "gold": GOLD},
        {"id": "c", "domain": "numbers", "prompt": "Say a number.", "verifier": IMPOSSIBLE, "gold": GOLD},
    ]


def _fingerprint(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*") if p.is_file()
    }


@pytest.fixture(scope="module")
def tiny_run(tiny_engine, tmp_path_factory):
    """An eval of the tiny model (2 samples a task) against verifiers no answer passes."""
    root = tmp_path_factory.mktemp("rescore")
    tasks = root / "tasks.jsonl"
    write_jsonl(tasks, _tasks(IMPOSSIBLE))
    run_eval(tiny_engine, str(tasks), samples=2, out=root / "run", max_tokens=6, seed=3, record=False)
    return root, tasks


def test_unchanged_verifiers_give_back_every_stored_verdict(tiny_run, tmp_path, run_cli):
    root, tasks = tiny_run
    before = _fingerprint(root / "run")
    done = run_cli("verify", "--rescore", str(root / "run"), "--out", str(tmp_path / "same"))
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "same" / "rescore.json").read_text())
    assert (report["responses"], report["rescored"], report["flips"], report["reward_changed"]) == (6, 6, [], 0)
    assert report["task_set_hash"]["run"] == report["task_set_hash"]["now"]
    assert "0 verdicts flipped" in done.stderr
    assert _fingerprint(root / "run") == before


def test_a_changed_verifier_flips_exactly_the_responses_it_now_judges_otherwise(tiny_run, tmp_path, run_cli):
    root, tasks = tiny_run
    samples = read_samples(root / "run" / "samples.parquet")
    assert not any(s.passed for s in samples)
    before = _fingerprint(root / "run")
    original = tasks.read_text()
    try:
        write_jsonl(tasks, _tasks({"kind": "regex", "pattern": "(?s).*"}))  # task a: every answer passes now
        done = run_cli("verify", "--rescore", str(root / "run"), "--out", str(tmp_path / "out"))
    finally:
        tasks.write_text(original)
    assert done.returncode == 0, done.stderr
    assert _fingerprint(root / "run") == before  # the run directory is only read
    report = json.loads((tmp_path / "out" / "rescore.json").read_text())
    flipped = {s.trajectory_id for s in samples if s.task_id == "a"}
    assert {f["id"] for f in report["flips"]} == flipped and len(flipped) == 2
    for flip in report["flips"]:
        assert flip["task_id"] == "a" and flip["domain"] == "letters"
        assert flip["before"] == {"reward": 0.0, "passed": False, "status": "scored"}
        assert flip["after"] == {"reward": 1.0, "passed": True, "status": "scored"}
    assert report["tasks"]["a"]["before"]["passed"] == 0 and report["tasks"]["a"]["after"]["passed"] == 2
    assert report["tasks"]["b"]["after"] == report["tasks"]["b"]["before"]
    letters = report["domains"]["letters"]
    assert (letters["before"]["passed"], letters["after"]["passed"], letters["after"]["responses"]) == (0, 2, 4)
    assert (letters["before"]["mean_reward"], letters["after"]["mean_reward"]) == (0.0, 0.5)
    assert report["domains"]["numbers"]["after"]["passed"] == 0
    assert (report["overall"]["after"]["passed"], report["overall"]["after"]["mean_reward"]) == (
        2,
        pytest.approx(1 / 3),
    )
    assert report["task_set_hash"]["run"] != report["task_set_hash"]["now"]
    scores = [json.loads(line) for line in (tmp_path / "out" / "scores.jsonl").read_text().splitlines()]
    assert [s["id"] for s in scores] == [s.trajectory_id for s in samples]
    assert "2 verdicts flipped" in done.stderr and "letters: passed 0 -> 2 of 4" in done.stderr


def test_bad_input_is_one_line_and_exit_2(tiny_run, tmp_path, run_cli):
    root, tasks = tiny_run

    def refused(*args: str) -> str:
        done = run_cli("verify", *args)
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
        return done.stderr

    (tmp_path / "plain").mkdir()
    assert "not an eval run (samples.parquet) or a training run" in refused(
        "--rescore", str(tmp_path / "plain"), "--out", str(tmp_path / "o")
    )
    assert "no such run directory" in refused("--rescore", str(tmp_path / "none"), "--out", str(tmp_path / "o"))
    assert "inside the run directory" in refused("--rescore", str(root / "run"), "--out", str(root / "run" / "re"))
    assert "leave out --responses" in refused(
        "--rescore", str(root / "run"), "--responses", str(tasks), "--out", str(tmp_path / "o")
    )
    other = tmp_path / "other.jsonl"
    write_jsonl(other, _tasks(IMPOSSIBLE)[:1])
    assert "2 tasks of" in refused("--rescore", str(root / "run"), "--tasks", str(other), "--out", str(tmp_path / "o"))
    assert "give --tasks FILE and --responses FILE, or --rescore RUN" in refused("--tasks", str(tasks), "--out", "x")
    assert not (tmp_path / "o").exists()


def test_a_run_that_records_no_task_file_takes_tasks(tiny_engine, tmp_path, run_cli):
    from veriloop.core import Task

    tasks = [Task.model_validate(t) for t in _tasks(IMPOSSIBLE)]
    run_eval(tiny_engine, tasks, samples=1, out=tmp_path / "run", max_tokens=4, seed=1, record=False)
    done = run_cli("verify", "--rescore", str(tmp_path / "run"), "--out", str(tmp_path / "o"))
    assert done.returncode == 2 and "records no task files to find its tasks in; give --tasks FILE" in done.stderr
    write_jsonl(tmp_path / "tasks.jsonl", tasks)
    report, scores = rescore_run(tmp_path / "run", [tmp_path / "tasks.jsonl"])
    assert report.rescored == 3 and report.flips == () and len(scores) == 3


OPS = "def add(a, b):\n    return a - b\n"
TEST_ADD = "from calc.ops import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
TEST_TYPES = "\n\ndef test_strings_are_refused():\n    import pytest\n\n    with pytest.raises(TypeError):\n        add('a', 'b')\n"


def _workspace_task(name: str, hidden: str) -> dict:
    return {
        "id": name,
        "domain": "terminal",
        "prompt": f"calc/ops.py has a bug ({name}): add subtracts. Fix it, then say done.",
        "verifier": {"kind": "workspace_tests", "files": {"tests/test_hidden.py": hidden}},
        "environment": "pytest",
        "workspace": {"calc/__init__.py": "", "calc/ops.py": OPS},
    }


def test_workspace_episodes_are_judged_again_on_their_kept_final_workspaces(env_with_pytest, tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    write_jsonl(tasks, [_workspace_task("fixed", TEST_ADD), _workspace_task("left", TEST_ADD)])
    policy = tmp_path / "policy.jsonl"
    fix = "<run_shell>sed -i 's/a - b/a + b/' calc/ops.py</run_shell>"
    rows = [{"prompt": _workspace_task("fixed", "")["prompt"], "turns": [fix, "done"]}]
    rows.append({"prompt": _workspace_task("left", "")["prompt"], "turns": ["<run_shell>ls</run_shell>", "done"]})
    policy.write_text("".join(json.dumps(row) + "\n" for row in rows))
    episode = eval_episode_config(1.0, 64, ("python", "shell", "submit"), 4)
    run_eval(f"replay:{policy}", str(tasks), out=tmp_path / "run", episode=episode, record=False)
    samples = {s.task_id: s for s in read_samples(tmp_path / "run" / "samples.parquet")}
    assert samples["fixed"].passed and not samples["left"].passed and samples["fixed"].scene
    before = _fingerprint(tmp_path / "run")

    write_jsonl(
        tasks, [_workspace_task("fixed", TEST_ADD + TEST_TYPES), _workspace_task("left", TEST_ADD + TEST_TYPES)]
    )
    report, scores = rescore_run(tmp_path / "run")
    [flip] = report.flips
    assert (flip.id, flip.task_id, flip.before.passed, flip.after.passed) == (
        samples["fixed"].trajectory_id,
        "fixed",
        True,
        False,
    )
    assert flip.after.reward == 0.5 and "1 of 2 hidden tests did not pass" in flip.feedback
    left = report.tasks["left"]  # `a - b` raises on strings: the new test passes, the verdict stays failed
    assert (left.before.mean_reward, left.after.mean_reward, left.after.passed) == (0.0, 0.5, 0)
    assert report.reward_changed == 2
    assert _fingerprint(tmp_path / "run") == before

    older = tmp_path / "older"  # a run made before passed episodes kept their final workspaces
    older.mkdir()
    (older / "eval.json").write_text((tmp_path / "run" / "eval.json").read_text())
    from veriloop.core import write_parquet

    write_parquet(
        older / "samples.parquet",
        [s.model_copy(update={"scene": ""}) if s.passed else s for s in samples.values()],
    )
    (older / "scenes").symlink_to(tmp_path / "run" / "scenes")
    report, _ = rescore_run(older)
    assert (report.rescored, report.not_rescored) == (1, {"its final workspace was not kept": 1})
