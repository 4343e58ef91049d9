"""Episodes on an environment served by openenv-core's own server (``examples/openenv/guess_server.py``),
run by the interpreter of an environment holding openenv-core 0.3.0 from the package registry:
a server started on loopback and given by its URL, or the example's app named by a task and
served in the sandbox, per episode, on a Unix socket."""

from __future__ import annotations

import json
import os
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


APP = {"app": "guess_server:app", "environment": "openenv-core", "app_dir": str(SERVER.parent)}


@pytest.fixture(scope="module")
def openenv_core_environment(env_store):
    from veriloop.sandbox._environments import build_environment

    return build_environment("openenv-core", ["openenv-core==0.3.0"], warm=[])


@pytest.fixture(scope="module")
def openenv_core_url(openenv_core_environment):
    import socket

    environment = openenv_core_environment
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


def _task(url: str | None = None, **server) -> Task:
    server = server or {"url": url}
    verifier = {"kind": "openenv", **server, "reset": {"seed": 13}, "observation_field": "text"}
    return Task(id="guess/13", domain="games", prompt=PROMPT, verifier=verifier)


def _boxed_servers(app: str) -> list[int]:
    """Processes started by this one (at any depth) whose command line names ``app``."""
    parents, commands = {}, {}
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
            commands[int(entry.name)] = (entry / "cmdline").read_bytes()
        except (OSError, ValueError):
            continue
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    ours = set()
    for pid in parents:
        ancestor = parents.get(pid)
        while ancestor and ancestor not in ours and ancestor != os.getpid():
            ancestor = parents.get(ancestor)
        if ancestor:
            ours.add(pid)
    return sorted(pid for pid in ours if app.encode() in commands.get(pid, b""))


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


def test_a_task_naming_the_app_plays_its_episode_on_a_server_in_the_sandbox(openenv_core_environment, tmp_path):
    script = tmp_path / "script.jsonl"
    turns = ['{"guess": 5}', '{"guess": 3}']
    script.write_text(json.dumps({"prompt": PROMPT, "turns": turns}) + "\n")
    config = EpisodeConfig(stop=StopConfig(max_turns=6))
    [trajectory] = rollout([_task(**APP)], ReplayEngine(script), config).trajectories
    assert (trajectory.reward, trajectory.stop_reason) == (1.0, "done"), trajectory.score
    assert [t.text for t in trajectory.turns if t.role == "observation"] == ["lower"]
    assert _boxed_servers("guess_server:app") == []
    replayed = verify(_task(**APP), Response(id="r", task_id="guess/13", response=turns[-1], turns=turns))
    assert (replayed.status, replayed.reward, replayed.passed) == ("scored", 1.0, True)
    missed = verify(_task(**APP), Response(id="r", task_id="guess/13", response="", turns=['{"guess": 4}']))
    assert (missed.status, missed.reward) == ("scored", 0.0)


def test_the_apps_server_lives_in_the_sandbox_for_the_session_and_is_gone_after(openenv_core_environment):
    from veriloop.verifiers import VERIFIERS, environment_session

    config = VERIFIERS.get("openenv").parse_config(_task(**APP).verifier)
    with environment_session(config) as session:
        socket_path = session.base_url.removeprefix("unix://")
        assert os.path.exists(socket_path) and _boxed_servers("guess_server:app") != []
        session.reset(seed=13)
        assert session.step({"guess": 0}).observation["text"] == "higher"
    assert _boxed_servers("guess_server:app") == []
    assert not os.path.exists(os.path.dirname(socket_path))


def test_an_app_that_does_not_import_is_an_infra_error_with_its_message(openenv_core_environment, tmp_path):
    (tmp_path / "broken_env.py").write_text("import no_such_package_here\napp = None\n")
    broken = {"app": "broken_env:app", "environment": "openenv-core", "app_dir": str(tmp_path)}
    score = verify(_task(**broken), Response(id="r", task_id="guess/13", response='{"guess": 3}'))
    assert (score.status, score.reward) == ("infra_error", None)
    assert "broken_env:app (environment openenv-core) did not start: it exited with status 1" in score.detail
    assert "No module named 'no_such_package_here'" in score.detail
    script = tmp_path / "script.jsonl"
    script.write_text(json.dumps({"prompt": PROMPT, "turns": ['{"guess": 3}']}) + "\n")
    [trajectory] = rollout([_task(**broken)], ReplayEngine(script), EpisodeConfig()).trajectories
    assert trajectory.score.status == "infra_error" and "no_such_package_here" in trajectory.score.detail
    assert _boxed_servers("broken_env:app") == []


DYING_APP = """
import os, sys
from guess_server import GuessAction, GuessEnvironment, GuessObservation, create_app


class DyingEnvironment(GuessEnvironment):
    def step(self, action):
        sys.stderr.write(f"the environment gave up on guess {action.guess}\\n")
        sys.stderr.flush()
        os._exit(3)


app = create_app(DyingEnvironment, GuessAction, GuessObservation, env_name="dying", max_concurrent_envs=8)
"""


def test_a_server_that_dies_mid_episode_is_an_infra_error_quoting_its_stderr(openenv_core_environment, tmp_path):
    (tmp_path / "guess_server.py").write_text(SERVER.read_text())
    (tmp_path / "dying_env.py").write_text(DYING_APP)
    dying = {"app": "dying_env:app", "environment": "openenv-core", "app_dir": str(tmp_path)}
    score = verify(_task(**dying), Response(id="r", task_id="guess/13", response='{"guess": 3}'))
    assert (score.status, score.reward) == ("infra_error", None)
    assert "dying_env:app (environment openenv-core): it exited with status 3" in score.detail
    assert "the environment gave up on guess 3" in score.detail
    assert _boxed_servers("dying_env:app") == []


def test_the_importer_starts_the_app_to_read_its_description(openenv_core_environment):
    from veriloop.tasks import IMPORTERS

    options = {"url": "guess_server:app", "environment": "openenv-core", "app_dir": str(SERVER.parent)}
    [task] = IMPORTERS.get("openenv").run({**options, "size": 1, "seed_start": 13})
    assert {k: task.verifier[k] for k in APP} == APP and "url" not in task.verifier
    assert "- guess (integer, required): the number you guess" in task.prompt
    assert _boxed_servers("guess_server:app") == []
