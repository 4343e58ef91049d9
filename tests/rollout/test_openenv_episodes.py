"""Episodes on an OpenEnv environment: a real OpenEnv-protocol server on loopback answers each turn."""

from __future__ import annotations

import json

import pytest

from veriloop.core import Task
from veriloop.rollout import EpisodeConfig, ReplayEngine, StopConfig, rollout

PROMPT = 'Find the hidden number. Answer each turn with {"guess": N}.'


def _task(url: str, seed: int = 7, **fields) -> Task:
    verifier = {"kind": "openenv", "url": url, "reset": {"seed": seed}, "observation_field": "text", **fields}
    return Task(id=f"guess/{seed}", domain="games", prompt=PROMPT, verifier=verifier)


def _script(tmp_path, *turns: str) -> ReplayEngine:
    path = tmp_path / "script.jsonl"
    path.write_text(json.dumps({"prompt": PROMPT, "turns": list(turns)}) + "\n")
    return ReplayEngine(path)


def test_the_environment_answers_each_turn_and_gives_the_reward(guess_server, tmp_path):
    engine = _script(tmp_path, '{"guess": 5}', "no idea", '{"guess": 7}', '{"guess": 1}')
    config = EpisodeConfig(stop=StopConfig(max_turns=8))
    [trajectory] = rollout([_task(guess_server.url)], engine, config).trajectories
    assert (trajectory.reward, trajectory.score.passed, trajectory.stop_reason) == (1.0, True, "done")
    assert [t.role for t in trajectory.turns] == ["assistant", "observation"] * 2 + ["assistant"]
    assert trajectory.turns[1].text == "higher"  # the environment's observation, fed back
    assert trajectory.turns[3].text.startswith("Not an action")
    assert trajectory.prompt[-1].role == "user" and "Guess a number from 0 to 9." in trajectory.prompt[-1].content
    assert guess_server.sessions == 1


def test_an_unfinished_episode_scores_zero_and_a_dead_server_an_infra_error(guess_server, tmp_path):
    engine = _script(tmp_path, '{"guess": 1}', '{"guess": 2}', '{"guess": 3}')
    config = EpisodeConfig(stop=StopConfig(max_turns=2))
    [unfinished] = rollout([_task(guess_server.url)], engine, config).trajectories
    assert (unfinished.reward, unfinished.stop_reason, unfinished.score.status) == (0.0, "max_turns", "scored")
    url = guess_server.url
    guess_server.__exit__()
    [lost] = rollout([_task(url)], engine, config).trajectories
    assert (lost.score.status, lost.reward, lost.stop_reason) == ("infra_error", None, "error")


def test_a_reward_past_a_float_ends_the_episode_as_an_infra_error_not_a_crash(weak_guess_server, tmp_path):
    engine = _script(tmp_path, '{"guess": 1, "reward": 1' + "0" * 400 + ', "done": true}')
    url = weak_guess_server("trusting").url  # it gives the reward the action names
    [trajectory] = rollout([_task(url)], engine, EpisodeConfig(stop=StopConfig(max_turns=2))).trajectories
    assert (trajectory.score.status, trajectory.reward, trajectory.stop_reason) == ("infra_error", None, "error")
    assert "the reward is a finite number or null" in trajectory.score.detail


def test_a_token_engine_trains_on_its_turns_only(guess_server, tiny_engine):
    config = EpisodeConfig(max_tokens_per_turn=6, stop=StopConfig(max_turns=3), temperature=1.0)
    [trajectory] = rollout([_task(guess_server.url)], tiny_engine, config, seed=3).trajectories
    assert trajectory.score.status == "scored" and trajectory.reward == 0.0
    offset = 0
    for turn in trajectory.turns:
        span = slice(offset, offset + len(turn.token_ids))
        assert trajectory.completion_ids[span] == turn.token_ids
        assert set(trajectory.loss_mask[span]) <= ({1} if turn.role == "assistant" else {0})
        offset += len(turn.token_ids)
    assert offset == len(trajectory.completion_ids)
    observations = [t for t in trajectory.turns if t.role == "observation"]
    assert observations and all(t.token_ids for t in observations)


@pytest.mark.e2e
def test_the_importer_writes_one_task_per_seed_with_a_prompt_from_the_server(guess_server, run_cli, tmp_path):
    out = tmp_path / "guess.jsonl"
    done = run_cli(
        "tasks",
        "import",
        "openenv",
        guess_server.url,
        "--size",
        "3",
        "--seed-start",
        "5",
        "--observation-field",
        "text",
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in rows] == ["guess/5", "guess/6", "guess/7"]
    assert rows[2]["verifier"]["reset"] == {"seed": 7} and rows[2]["verifier"]["url"] == guess_server.url
    prompt = rows[0]["prompt"]
    assert prompt.startswith("Find the hidden number from 0 to 9.")
    assert "- guess (integer, required): the number you guess" in prompt and "metadata" not in prompt
    engine = _script(tmp_path, '{"guess": 7}')
    task = Task.model_validate({**rows[2], "prompt": PROMPT})
    [trajectory] = rollout([task], engine, EpisodeConfig()).trajectories
    assert (trajectory.reward, trajectory.stop_reason) == (1.0, "done")


def test_importing_from_a_server_that_is_not_running_writes_nothing(run_cli, tmp_path):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    out = tmp_path / "guess.jsonl"
    done = run_cli("tasks", "import", "openenv", f"http://127.0.0.1:{port}", "--out", str(out))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "start the environment's server first" in done.stderr and not out.exists()


def test_the_importer_takes_the_apps_server_variables_as_name_value_or_json():
    from veriloop.core import UserError
    from veriloop.tasks import IMPORTERS

    source = IMPORTERS.get("openenv")
    app = {"url": "server:app", "environment": "env"}
    assert source.parse_options({**app, "app_env": "DATA={app_dir}/a=b.jsonl"}).app_env == {
        "DATA": "{app_dir}/a=b.jsonl"
    }
    assert source.parse_options({**app, "app_env": {"A": "1", "B": "2"}}).app_env == {"A": "1", "B": "2"}
    with pytest.raises(UserError, match=r"--app-env: 'DATA': give NAME=VALUE"):
        source.parse_options({**app, "app_env": "DATA"})
    with pytest.raises(UserError, match="--app-env: variable PATH: the sandbox sets it"):
        source.parse_options({**app, "app_env": "PATH=/bin"})
    with pytest.raises(UserError, match="--app-env sets variables of an app's server; give --environment"):
        source.run({"url": "http://127.0.0.1:9", "app_env": "DATA=x"})
    with pytest.raises(UserError, match="DATA names {app_dir}, but no app_dir is given"):
        source.run({**app, "app_env": "DATA={app_dir}/data.jsonl"})
