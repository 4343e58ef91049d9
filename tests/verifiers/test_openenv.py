"""The ``openenv`` kind and its session client, against a real OpenEnv-protocol server on loopback."""

from __future__ import annotations

import socket

import pytest
from pydantic import ValidationError

from veriloop.core import Response, Task
from veriloop.verifiers import (
    VERIFIERS,
    OpenEnvConfig,
    OpenEnvError,
    OpenEnvSession,
    StepResult,
    observation_text,
    verify,
)
from veriloop.verifiers.openenv._openenv import MAX_ACTION_DEPTH, InvalidAction, action_of


def _task(url: str, **fields) -> Task:
    verifier = {"kind": "openenv", "url": url, "reset": {"seed": 7}, **fields}
    return Task(id="guess/7", domain="games", prompt="Find the number.", verifier=verifier)


def _verify(task: Task, *turns: str):
    return verify(task, Response(id="r", task_id=task.id, response=turns[-1], turns=turns))


def test_a_session_resets_steps_and_reports_state(guess_server):
    with OpenEnvSession(guess_server.url) as session:
        start = session.reset(seed=13)
        assert start.observation == {"text": "Guess a number from 0 to 9.", "misses_left": 5}
        assert (start.reward, start.done) == (None, False)
        miss = session.step({"guess": 1})
        assert (miss.observation["text"], miss.reward, miss.done) == ("higher", 0.0, False)
        assert session.state()["step_count"] == 1
        hit = session.step({"guess": 3})
        assert (hit.reward, hit.done) == (1.0, True)


def test_an_invalid_action_is_the_environments_validation_error(guess_server):
    with OpenEnvSession(guess_server.url) as session:
        session.reset()
        with pytest.raises(OpenEnvError) as caught:
            session.step({"guess": "three"})
        assert caught.value.code == "VALIDATION_ERROR"
        assert session.step({"guess": 0}).done  # the session goes on after the refusal


def test_replayed_turns_that_find_the_number_score_the_environments_reward(guess_server):
    score = _verify(_task(guess_server.url), '{"guess": 5}', 'Lower, so: ```json\n{"guess": 7}\n```')
    assert (score.status, score.reward, score.passed) == ("scored", 1.0, True)
    assert "done after 2 steps" in score.detail


def test_an_episode_that_does_not_finish_scores_zero(guess_server):
    score = _verify(_task(guess_server.url), '{"guess": 1}', '{"guess": 2}')
    assert (score.status, score.reward, score.passed) == ("scored", 0.0, False)
    assert "did not finish after 2 steps" in score.detail


def test_five_misses_end_the_episode_with_the_environments_zero(guess_server):
    score = _verify(_task(guess_server.url), *[f'{{"guess": {g}}}' for g in (0, 1, 2, 3, 4, 7)])
    assert (score.reward, score.passed) == (0.0, False)
    assert "done after 5 steps" in score.detail  # the sixth turn came after done


def test_turns_that_give_no_action_or_a_refused_one_are_not_steps(guess_server):
    task = _task(guess_server.url, max_steps=2)
    score = _verify(task, "seven?", '{"guess": "seven"}', '{"guess": 1}', '{"guess": 7}')
    assert (score.reward, score.passed) == (1.0, True)
    assert "done after 2 steps" in score.detail


def test_max_steps_cuts_the_replay(guess_server):
    score = _verify(_task(guess_server.url, max_steps=1), '{"guess": 1}', '{"guess": 7}')
    assert (score.reward, score.passed) == (0.0, False)
    assert "ran out of steps" in score.detail


def test_sum_adds_every_steps_reward(guess_server):
    score = _verify(_task(guess_server.url, reward="sum", pass_reward=0.5), '{"guess": 9}', '{"guess": 7}')
    assert (score.reward, score.passed) == (1.0, True)


def test_an_unreachable_environment_is_an_infra_error_never_a_zero():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens here once the socket closes
    score = _verify(_task(f"http://127.0.0.1:{port}"), '{"guess": 7}')
    assert (score.status, score.reward) == ("infra_error", None)
    assert "cannot open a session" in score.detail


def test_a_server_without_sessions_is_an_infra_error(guess_server):
    score = _verify(_task(guess_server.url + "/nowhere"), '{"guess": 7}')
    assert score.status == "infra_error"
    assert "no WebSocket session" in score.detail


def test_the_address_must_be_http_or_ws():
    with pytest.raises(ValidationError, match="not an environment's address"):
        VERIFIERS.get("openenv").parse_config({"url": "ftp://example.org"})
    assert OpenEnvConfig(url="http://127.0.0.1:8000/").url == "http://127.0.0.1:8000"


def test_a_server_on_a_unix_socket_is_reached_at_its_unix_address(tmp_path):
    import importlib.util
    from pathlib import Path

    from veriloop.verifiers import environment_description

    spec = importlib.util.spec_from_file_location("openenv_server", Path(__file__).parents[1] / "openenv_server.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with module.GuessUnixServer(str(tmp_path / "env.sock")) as server:
        score = _verify(_task(server.url), '{"guess": 5}', '{"guess": 7}')
        assert (score.status, score.reward, server.sessions) == ("scored", 1.0, 1)
        assert score.detail.startswith(f"{server.url}: done after 2 steps")
        metadata, schema = environment_description(server.url)
    assert metadata["name"] == "guess" and schema["action"]["required"] == ["guess"]
    gone = _verify(_task(server.url), '{"guess": 7}')
    assert gone.status == "infra_error" and "cannot open a session" in gone.detail


def test_a_config_names_one_server_a_url_or_an_app_on_its_environment():
    parse = VERIFIERS.get("openenv").parse_config
    with pytest.raises(ValidationError, match="give the environment's url"):
        parse({})
    with pytest.raises(ValidationError, match="give the environment's url"):
        parse({"url": "http://127.0.0.1:8000", "app": "server:app", "environment": "env"})
    with pytest.raises(ValidationError, match="needs the environment it runs on"):
        parse({"app": "server:app"})
    with pytest.raises(ValidationError, match="not an app reference"):
        parse({"app": "server.py", "environment": "env"})
    with pytest.raises(ValidationError, match="not a Unix socket's address"):
        parse({"url": "unix://relative/env.sock"})
    config = parse({"app": "pkg.server:make_app()", "environment": "env", "app_dir": "examples/openenv"})
    assert config.app_dir.startswith("/") and config.where == "pkg.server:make_app() (environment env)"


def test_an_app_on_an_environment_that_is_not_built_is_an_infra_error(env_store):
    verifier = {"kind": "openenv", "app": "server:app", "environment": "not-built-here"}
    score = _verify(Task(id="guess/7", domain="games", prompt="Find the number.", verifier=verifier), '{"guess": 7}')
    assert (score.status, score.reward) == ("infra_error", None)
    assert "server:app (environment not-built-here) did not start" in score.detail


def test_an_apps_server_variables_are_checked_and_may_name_its_directory():
    parse = VERIFIERS.get("openenv").parse_config
    app = {"app": "server:app", "environment": "env"}
    with pytest.raises(ValidationError, match="app_env: variable HOME: the sandbox sets it"):
        parse({**app, "app_env": {"HOME": "/data"}})
    with pytest.raises(ValidationError, match="app_env: variable 'DATA PATH': a name is letters"):
        parse({**app, "app_env": {"DATA PATH": "x"}})
    with pytest.raises(ValidationError, match="DATA names {app_dir}, but no app_dir is given"):
        parse({**app, "app_env": {"DATA": "{app_dir}/data.jsonl"}})
    with pytest.raises(ValidationError, match="a server at a url has its own"):
        parse({"url": "http://127.0.0.1:8000", "app_env": {"DATA": "x"}})
    config = parse({**app, "app_dir": "examples/openenv", "app_env": {"DATA": "{app_dir}/data.jsonl"}, "disk_mb": 512})
    assert config.app_env == {"DATA": "{app_dir}/data.jsonl"}
    limits = config.server_limits()
    assert (limits.disk_mb, limits.max_file_mb) == (512, 512)  # a cache file may fill the server's /tmp


def _nested_action(depth: int) -> str:
    """The text of an action whose lists and objects nest ``depth`` levels deep."""
    return '{"guess": ' + "[" * (depth - 1) + "7" + "]" * (depth - 1) + "}"


def test_an_action_nested_too_deeply_is_not_sent_nor_a_recursion_error():
    config = OpenEnvConfig(url="http://127.0.0.1:8000")
    assert action_of(config, _nested_action(MAX_ACTION_DEPTH))["guess"]
    with pytest.raises(InvalidAction, match=f"nested more than {MAX_ACTION_DEPTH} levels deep"):
        action_of(config, _nested_action(MAX_ACTION_DEPTH + 1))
    with pytest.raises(InvalidAction, match="no action found"):
        action_of(config, _nested_action(100_000))


def test_a_reward_that_is_not_a_finite_number_is_the_environments_failure(weak_guess_server):
    url = weak_guess_server("trusting").url  # it takes the reward an action gives
    score = _verify(_task(url), '{"guess": 1, "reward": 1' + "0" * 400 + ', "done": true}')
    assert (score.status, score.reward) == ("infra_error", None)
    assert "the reward is a finite number or null" in score.detail
    with OpenEnvSession(url) as session:
        session.reset()
        with pytest.raises(OpenEnvError, match="the reward is a finite number or null"):
            session.step({"guess": 1, "reward": float("nan")})


def test_what_the_environment_sends_back_holds_no_lone_surrogate(weak_guess_server):
    shown = observation_text(
        OpenEnvConfig(url="http://127.0.0.1:8000", observation_field="text"), StepResult({"text": "a\ud800"})
    )
    assert shown == "a\ufffd"
    with OpenEnvSession(weak_guess_server("fragile").url) as session:  # it quotes the guess it cannot read
        session.reset()
        with pytest.raises(OpenEnvError) as caught:
            session.step({"guess": "\ud800"})
    assert caught.value.code == "EXECUTION_ERROR" and "cannot read the guess \ufffd" in caught.value.detail
    assert str(caught.value).encode() and caught.value.detail.encode()
