"""Episodes on an environment served by openenv-core's own server (``examples/openenv/guess_server.py``),
run by the interpreter of an environment holding openenv-core 0.3.0 from the package registry."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from veriloop.core import Response, Task
from veriloop.rollout import EpisodeConfig, ReplayEngine, StopConfig, rollout
from veriloop.verifiers import OpenEnvError, OpenEnvSession, verify

pytestmark = pytest.mark.e2e

SERVER = Path(__file__).parents[2] / "examples" / "openenv" / "guess_server.py"
PROMPT = 'Find the hidden number. Answer each turn with {"guess": N}.'


@pytest.fixture(scope="module")
def openenv_core_url(env_store):
    import socket

    from veriloop.sandbox._environments import build_environment

    environment = build_environment("openenv-core", ["openenv-core==0.3.0"], warm=[])
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen([f"{environment.path}/bin/python", str(SERVER), str(port)], stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                with urllib.request.urlopen(url + "/health", timeout=1) as answer:
                    assert json.load(answer)["status"] == "healthy"
                break
            except OSError:
                assert server.poll() is None, server.stderr.read().decode()
                time.sleep(0.1)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=10)


def _task(url: str) -> Task:
    verifier = {"kind": "openenv", "url": url, "reset": {"seed": 13}, "observation_field": "text"}
    return Task(id="guess/13", domain="games", prompt=PROMPT, verifier=verifier)


def test_the_client_speaks_openenv_cores_protocol(openenv_core_url):
    with OpenEnvSession(openenv_core_url) as session:
        assert session.reset(seed=13).observation == {"text": "Guess a number from 0 to 9.", "misses_left": 5}
        miss = session.step({"guess": 1})
        assert (miss.observation["text"], miss.reward, miss.done) == ("higher", 0.0, False)
        assert session.state()["step_count"] == 1
        with pytest.raises(OpenEnvError) as refused:
            session.step({"guess": "three"})
        assert refused.value.code == "VALIDATION_ERROR"
        assert session.step({"guess": 3}).reward == 1.0


def test_the_importer_reads_the_servers_metadata_and_action_schema(openenv_core_url):
    from veriloop.tasks import IMPORTERS

    [task] = IMPORTERS.get("openenv").run({"url": openenv_core_url, "size": 1, "seed_start": 13})
    assert task.id == "guess/13" and task.verifier["reset"] == {"seed": 13}
    assert task.prompt.startswith("Find the hidden number from 0 to 9.")
    assert "- guess (integer, required): the number you guess" in task.prompt


def test_an_episode_and_its_replay_get_the_environments_reward(openenv_core_url, tmp_path):
    script = tmp_path / "script.jsonl"
    turns = ['{"guess": 5}', '{"guess": "five"}', '{"guess": 3}']
    script.write_text(json.dumps({"prompt": PROMPT, "turns": turns}) + "\n")
    config = EpisodeConfig(stop=StopConfig(max_turns=6))
    [trajectory] = rollout([_task(openenv_core_url)], ReplayEngine(script), config).trajectories
    assert (trajectory.reward, trajectory.stop_reason) == (1.0, "done")
    assert [t.text for t in trajectory.turns if t.role == "observation"][0] == "lower"
    assert "refused the action" in trajectory.turns[3].text
    replayed = verify(_task(openenv_core_url), Response(id="r", task_id="guess/13", response=turns[-1], turns=turns))
    assert (replayed.reward, replayed.passed) == (1.0, True)
