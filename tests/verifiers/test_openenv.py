"""The ``openenv`` kind and its session client, against a real OpenEnv-protocol server on loopback."""

from __future__ import annotations

import socket

import pytest
from pydantic import ValidationError

from veriloop.core import Response, Task
from veriloop.verifiers import VERIFIERS, OpenEnvConfig, OpenEnvError, OpenEnvSession, verify


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
