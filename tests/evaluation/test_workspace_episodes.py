"""Episodes on a workspace and an environment, end to end: eval with a replayed policy, kept
failure scenes that replay to the same verdict, and runs that refuse to mix environment builds."""

from __future__ import annotations

import json

import pytest

from veriloop.core import UserError
from veriloop.evaluation import find_scene, read_samples, replay_scene, run_eval
from veriloop.evaluation._run import eval_episode_config

OPS = "def add(a, b):\n    return a - b\n"
HIDDEN = {
    "tests/test_hidden.py": "from calc.ops import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
    "def test_zero():\n    assert add(0, 0) == 0\n"
}
PROMPT = "calc/ops.py has a bug: add subtracts. Fix it, then say done."
FIX = "<run_shell>sed -i 's/a - b/a + b/' calc/ops.py</run_shell>"
POLICIES = {
    "good": [FIX, "done"],
    "bad": ["<run_shell>ls calc</run_shell>", "done"],
    "delete tests": ["<run_shell>mkdir -p tests && rm -rf tests/*</run_shell>", "done"],
    "conftest": [
        "<run_python>open('conftest.py', 'w').write('import pytest\\n@pytest.hookimpl(hookwrapper=True)\\n"
        'def pytest_runtest_makereport(item, call):\\n    o = yield\\n    o.get_result().outcome = "passed"\\n\')'
        "</run_python>",
        "done",
    ],
    "fake pytest": [
        "<run_shell>mkdir pytest && printf 'raise SystemExit(0)' > pytest/__main__.py && touch pytest/__init__.py</run_shell>",
        "done",
    ],
}


@pytest.fixture
def task_file(tmp_path, env_with_pytest):
    task = {
        "id": "calc",
        "domain": "terminal",
        "prompt": PROMPT,
        "verifier": {"kind": "workspace_tests", "files": HIDDEN},
        "environment": "pytest",
        "workspace": {"calc/__init__.py": "", "calc/ops.py": OPS},
        "gold": {"workspace": {"calc/ops.py": OPS.replace("a - b", "a + b")}},
    }
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(task) + "\n")
    return path


def _policy(tmp_path, name: str):
    path = tmp_path / f"{name.replace(' ', '-')}.jsonl"
    path.write_text(json.dumps({"prompt": PROMPT, "turns": POLICIES[name]}) + "\n")
    return f"replay:{path}"


def _eval(model: str, task_file, out, **options):
    episode = eval_episode_config(1.0, 64, ("python", "shell", "submit"), 4)
    return run_eval(model, task_file, out=out, episode=episode, record=False, **options)


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_known_sequences_pass_and_tampering_ones_do_not(task_file, tmp_path, policy, env_with_pytest):
    summary = _eval(_policy(tmp_path, policy), task_file, tmp_path / "out")
    assert summary["pass@1"] == (1.0 if policy == "good" else 0.0), summary
    assert summary["environments"] == {"pytest": env_with_pytest.hash}
    [sample] = read_samples(tmp_path / "out" / "samples.parquet")
    assert sample.environment == env_with_pytest.hash
    assert sample.scene  # every episode keeps its final workspace, passed or failed


@pytest.mark.e2e
def test_a_failure_scene_replays_to_the_same_verdict(task_file, tmp_path, run_cli):
    _eval(_policy(tmp_path, "conftest"), task_file, tmp_path / "out", export_failures=tmp_path / "failed.jsonl")
    [sample] = read_samples(tmp_path / "out" / "samples.parquet")
    scene = find_scene(tmp_path / "out", sample.trajectory_id)
    assert "conftest.py" in scene.snapshot.files() and scene.task.id == "calc"
    score = replay_scene(scene)
    assert (score.reward, score.passed) == (sample.reward, sample.passed)
    done = run_cli("replay", sample.trajectory_id, "--run", str(tmp_path / "out"))
    assert done.returncode == 0 and "same verdict" in done.stderr
    assert json.loads(done.stdout)["reward"] == sample.reward
    [failed] = [json.loads(line) for line in (tmp_path / "failed.jsonl").read_text().splitlines()]
    assert failed["metadata"]["eval_failure"]["scene"] == sample.scene
    assert run_cli("replay", "0" * 16, "--run", str(tmp_path / "out")).returncode == 2


def test_an_eval_refuses_to_resume_on_another_build_of_its_environment(task_file, tmp_path, env_store):
    out = tmp_path / "out"
    _eval(_policy(tmp_path, "good"), task_file, out)
    manifest = env_store / "pytest.json"
    saved = manifest.read_text()
    try:
        manifest.write_text(saved.replace(json.loads(saved)["hash"], "f" * 64))
        with pytest.raises(UserError, match="environments differ"):
            _eval(_policy(tmp_path, "good"), task_file, out)
    finally:
        manifest.write_text(saved)


@pytest.mark.e2e
def test_compare_refuses_runs_on_different_builds(task_file, tmp_path, run_cli):
    for name in ("a", "b"):
        _eval(_policy(tmp_path, "good"), task_file, tmp_path / name)
    summary = json.loads((tmp_path / "b" / "summary.json").read_text())
    summary["environments"]["pytest"] = "e" * 64
    (tmp_path / "b" / "summary.json").write_text(json.dumps(summary))
    refused = run_cli("compare", str(tmp_path / "a"), str(tmp_path / "b"))
    assert refused.returncode == 2 and "different builds" in refused.stderr
    allowed = run_cli("compare", str(tmp_path / "a"), str(tmp_path / "b"), "--allow-environment-change")
    assert allowed.returncode == 0, allowed.stderr


def test_a_missing_environment_stops_the_eval_before_it_starts(tmp_path, env_store):
    task = {"id": "t", "domain": "d", "prompt": PROMPT, "verifier": {"kind": "workspace_tests", "files": HIDDEN}}
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({**task, "environment": "not-built"}) + "\n")
    with pytest.raises(UserError, match="veriloop env build not-built"):
        _eval(_policy(tmp_path, "good"), path, tmp_path / "out")
    assert not (tmp_path / "out" / "samples.parquet").exists()


@pytest.mark.e2e
def test_verify_scores_a_final_workspace_offline(task_file, tmp_path, run_cli):
    fixed = {"calc/__init__.py": "", "calc/ops.py": OPS.replace("a - b", "a + b")}
    rows = [
        {"id": "fixed", "task_id": "calc", "response": "done", "workspace": fixed},
        {
            "id": "unfixed",
            "task_id": "calc",
            "response": "done",
            "workspace": {"calc/__init__.py": "", "calc/ops.py": OPS},
        },
    ]
    responses = tmp_path / "responses.jsonl"
    responses.write_text("".join(json.dumps(r) + "\n" for r in rows))
    done = run_cli(
        "verify", "--tasks", str(task_file), "--responses", str(responses), "--out", str(tmp_path / "scores.jsonl")
    )
    assert done.returncode in (0, 1), done.stderr
    scores = {s["id"]: s for s in map(json.loads, (tmp_path / "scores.jsonl").read_text().splitlines())}
    assert scores["fixed"]["reward"] == 1.0 and scores["unfixed"]["reward"] == 0.5


def test_a_replay_script_with_bad_rows_is_a_user_error(tmp_path):
    from veriloop.rollout import ReplayEngine

    path = tmp_path / "bad.jsonl"
    path.write_text('{"prompt": "p"}\nnot json\n')
    with pytest.raises(UserError, match=r"line 1.*turns"):
        ReplayEngine(path)


def test_a_multi_turn_sample_keeps_its_episode_for_review(task_file, tmp_path, env_with_pytest):
    """Tool calls and observations stay with the eval sample, so the review screen shows them."""
    from veriloop.review import load_sources

    _eval(_policy(tmp_path, "good"), task_file, tmp_path / "out")
    [sample] = read_samples(tmp_path / "out" / "samples.parquet")
    roles = [turn["role"] for turn in sample.episode]
    assert (
        roles[0] == "assistant" and "observation" in roles and len(roles) == sample.turns + roles.count("observation")
    )
    assert [t["text"] for t in sample.episode if t["role"] == "assistant"] == list(sample.turn_texts)
    assert any(t["tool"] for t in sample.episode if t["role"] == "assistant")
    [reviewed] = load_sources([tmp_path / "out"])
    assert [(t.role, t.text) for t in reviewed.turns] == [(t["role"], t["text"]) for t in sample.episode]
