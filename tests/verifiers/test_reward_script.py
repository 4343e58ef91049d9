"""``reward_script``: a script run on the final workspace writes the reward (Harbor's test.sh)."""

from __future__ import annotations

import json

import pytest

from veriloop.core import Response, Task
from veriloop.sandbox import build_environment
from veriloop.verifiers import verify

LINKS = {"/app": "/workspace", "/tests": "/workspace/.hidden/tests", "/logs": "/tmp/logs"}


@pytest.fixture(scope="module")
def environment(env_store):
    return build_environment("reward-script", links=LINKS)


def _task(script: str, **fields) -> Task:
    verifier = {
        "kind": "reward_script",
        "files": {".hidden/tests/test.sh": script},
        "command": ["bash", "/tests/test.sh"],
        "reward_dir": "/logs/verifier",
        "timeout_s": 20,
        **fields,
    }
    return Task(
        id="t", domain="d", prompt="p", environment="reward-script", workspace={"answer.txt": ""}, verifier=verifier
    )


def _score(task: Task, workspace: dict[str, str] | None = None):
    return verify(task, Response(id="r", task_id="t", response="done", workspace=workspace))


WRITES = "mkdir -p /logs/verifier\n"


@pytest.mark.parametrize(
    ("script", "reward", "passed", "source"),
    [
        (WRITES + "echo 1 > /logs/verifier/reward.txt", 1.0, True, "reward.txt"),
        (WRITES + "echo ' 0.25 ' > /logs/verifier/reward.txt; exit 1", 0.25, False, "reward.txt"),
        (WRITES + """echo '{"reward": 0.5, "cases": 4}' > /logs/verifier/reward.json""", 0.5, False, "reward.json"),
        (
            WRITES + """echo '{"accuracy": 0.75, "note": "x"}' > /logs/verifier/reward.json""",
            0.75,
            False,
            "reward.json",
        ),
        (
            WRITES + "echo 0 > /logs/verifier/reward.txt; echo '{\"reward\": 1}' > /logs/verifier/reward.json",
            0.0,
            False,
            "reward.txt",
        ),
        ("exit 0", 1.0, True, "the exit code"),
        ("exit 3", 0.0, False, "the exit code"),
    ],
)
def test_the_reward_comes_from_the_file_it_writes_or_its_exit_code(environment, script, reward, passed, source):
    score = _score(_task(script))
    assert (score.status, score.reward, score.passed) == ("scored", reward, passed), score
    assert f"from {source}" in score.detail and "runs the workspace's code" in score.detail
    assert score.environment == environment.hash


def test_the_script_judges_the_final_workspace_from_the_container_s_paths(environment):
    script = WRITES + "if grep -qx 42 /app/answer.txt; then echo 1; else echo 0; fi > /logs/verifier/reward.txt"
    task = _task(script)
    assert _score(task, {"answer.txt": "42\n"}).passed
    failed = _score(task, {"answer.txt": "41\n"})
    assert not failed.passed and failed.feedback == "The tests did not pass (reward 0)."


def test_a_reward_file_that_holds_no_reward_scores_zero_and_says_why(environment):
    score = _score(_task(WRITES + "echo high > /logs/verifier/reward.txt"))
    assert (score.status, score.reward) == ("scored", 0.0)
    assert "reward.txt holds 'high', not a number" in score.detail
    silent = _score(_task("exit 0", exit_code_reward=False))
    assert silent.reward == 0.0 and "wrote no reward.txt or reward.json" in silent.detail


def test_a_reward_planted_before_the_run_does_not_count(environment):
    task = _task("exit 1", reward_dir="out/verifier")
    planted = {"answer.txt": "", "out/verifier/reward.txt": "1", "out/verifier/reward.json": '{"reward": 1}'}
    score = _score(task, planted)
    assert (score.reward, score.passed) == (0.0, False), score
    assert "from the exit code" in score.detail


def test_what_the_agent_left_beside_the_hidden_files_is_removed(environment):
    script = WRITES + "if [ -e /tests/helper.sh ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt"
    score = _score(_task(script), {"answer.txt": "", ".hidden/tests/helper.sh": "echo 1"})
    assert score.reward == 0.0 and "left out of the run: .hidden/tests/helper.sh" in score.detail
    rewritten = _score(_task(WRITES + "echo 0 > /logs/verifier/reward.txt"), {".hidden/tests/test.sh": "exit 0"})
    assert rewritten.reward == 0.0  # the hidden script is written over the agent's copy


def test_variables_reach_the_script_and_a_slow_one_is_stopped(environment):
    script = WRITES + 'echo "$EXPECTED" > /logs/verifier/reward.txt'
    assert _score(_task(script, variables={"EXPECTED": "0.5"})).reward == 0.5
    slow = _score(_task("sleep 30", timeout_s=1))
    assert (slow.status, slow.reward, slow.passed) == ("scored", 0.0, False)
    assert "did not finish within 1s" in slow.detail


def test_bad_fields_are_refused_by_the_kind():
    from veriloop.tasks import check_task

    assert "needs at least one hidden file" in check_task(_task("exit 0", files={}))
    assert "without '..'" in check_task(_task("exit 0", reward_dir="../up"))
    assert "non-empty list" in check_task(_task("exit 0", command=[]))


def test_the_audit_finds_a_script_that_runs_the_workspace_s_code_forgeable(environment):
    from veriloop.verifiers import audit_tasks

    script = (
        WRITES
        + "python -c 'import solution; print(solution.answer())' | grep -qx 42 && echo 1 > /logs/verifier/reward.txt"
    )
    task = Task(
        id="t",
        domain="d",
        prompt="p",
        environment="reward-script",
        workspace={"solution.py": "def answer():\n    return 41\n"},
        verifier={
            "kind": "reward_script",
            "files": {".hidden/tests/test.sh": script},
            "command": ["bash", "/tests/test.sh"],
            "reward_dir": "/logs/verifier",
            "exit_code_reward": False,
        },
    )
    report = audit_tasks([task], repeats=1)
    rows = {row.category: row for row in report.rows if row.kind == "reward_script"}
    assert rows["channel_forgery"].fooled == 1  # the module writes reward.txt when the script imports it
    assert rows["grader_tampering"].fooled == 0  # the hidden script is the verifier's own
    assert "which can write the reward file as it likes" in json.dumps(report.model_dump())
