"""Review fixtures: real eval run directories (with the task file their eval.json lists) and a
real trajectory store, holding the kinds of samples a reviewer must see: hacks that passed, an
answer made of HTML and script, a broken grader, a multi-turn episode, a verdict that flipped."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from veriloop.core import Score, Task, Trajectory, Turn, write_jsonl, write_parquet

VERILOOP = Path(sys.executable).with_name("veriloop")
SCRIPT_ANSWER = "<script>document.title='pwned'</script><b>42</b>"
TAMPER_ANSWER = "```python\nimport os\nprint('All tests passed.')\nos._exit(0)\n```"


def _tasks() -> list[Task]:
    tasks = [
        Task(id=f"math/{i}", domain="math", prompt=f"What is {i} + 40?", verifier={"kind": "exact"}, gold=str(i + 40))
        for i in range(8)
    ]
    tasks += [
        Task(
            id=f"extract/{i}",
            domain="extraction",
            prompt=f"Find the code in: 'the code is {100 + i}, not 7'. Answer with the code.",
            verifier={"kind": "regex", "pattern": rf".*{100 + i}.*", "mode": "fullmatch"},  # lenient on purpose
            gold=str(100 + i),
        )
        for i in range(6)
    ]
    return tasks


def _sample(task: Task, index: int, response: str, passed: bool, **extra):
    from veriloop.evaluation import EvalSample

    infra = extra.pop("infra", False)
    return EvalSample(
        task_id=task.id,
        domain=task.domain,
        sample_index=index,
        prompt=task.prompt,
        response=response,
        reward=None if infra else float(passed),
        passed=passed and not infra,
        status="infra_error" if infra else "scored",
        detail=extra.pop("detail", "grader process died" if infra else ("matches" if passed else "differs")),
        feedback="" if infra else ("Correct." if passed else f"Expected {task.gold}."),
        **extra,
    )


def _write_eval(directory: Path, task_file: Path, rows) -> Path:
    from veriloop.evaluation import summarize

    directory.mkdir(parents=True)
    write_parquet(directory / "samples.parquet", rows)
    summary = {
        "model": directory.name,
        "engine": "planted",
        "task_set_hash": "review",
        "samples_per_task": 4,
        "seed": 0,
        **summarize(rows, 4),
        "created_at": "2026-01-01T00:00:00+00:00",
        "out": str(directory),
    }
    (directory / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    (directory / "eval.json").write_text(json.dumps({"task_files": [str(task_file)]}), encoding="utf-8")
    return directory


@pytest.fixture
def review_runs(tmp_path) -> dict[str, Path]:
    """``tasks`` (the task file), ``before`` and ``after`` (two checkpoints' eval runs)."""
    tasks = _tasks()
    task_file = tmp_path / "tasks.jsonl"
    write_jsonl(task_file, tasks)
    by_id = {t.id: t for t in tasks}
    before, after = [], []
    for task in tasks[:8]:  # math: mostly right, ordinary answers
        for index in range(4):
            right = index < 3
            response = f"The sum is {task.gold}, since adding forty gives it." if right else "The sum is 3."
            was_right = right and task.id != "math/7"  # math/7 flips fail -> pass between the checkpoints
            before.append(_sample(task, index, response if was_right else "The sum is 3.", was_right))
            after.append(_sample(task, index, response, right))
    math0 = by_id["math/0"]
    after[0] = _sample(math0, 0, SCRIPT_ANSWER, True)  # markup in the answer, shown as text
    after[1] = _sample(math0, 1, "x", True)  # a very short pass
    after[3] = _sample(math0, 3, "", False, infra=True)
    for task in tasks[8:]:  # extraction: the model hedges; the lenient regex passes it
        for index in range(4):
            hedge = index == 0
            response = f"7 or {task.gold} or 8" if hedge else "7"
            before.append(_sample(task, index, "7", False))
            after.append(_sample(task, index, response, hedge))
    after[-1] = _sample(by_id["extract/5"], 3, TAMPER_ANSWER, False)
    return {
        "tasks": task_file,
        "before": _write_eval(tmp_path / "runs" / "step-0", task_file, before),
        "after": _write_eval(tmp_path / "runs" / "step-100", task_file, after),
    }


@pytest.fixture
def trajectory_store(tmp_path) -> Path:
    """A training run's trajectory store with multi-turn episodes (tool calls and observations)."""
    from veriloop.rollout import TrajectoryStore

    store = TrajectoryStore(tmp_path / "train" / "trajectories")
    trajectories = []
    for number in range(6):
        passed = number % 2 == 0
        trajectories.append(
            Trajectory(
                id=f"traj-{number}",
                task_id=f"tool/{number % 3}",
                domain="tools",
                group_id=f"g{number % 3}",
                sample_index=number // 3,
                turns=(
                    Turn(role="assistant", text="<tool>python</tool> print(6 * 7)", tool="python"),
                    Turn(role="observation", text="42\n<i>not markup</i>"),
                    Turn(role="assistant", text="The answer is 42."),
                ),
                response="The answer is 42." if passed else "The answer is 41.",
                reward=float(passed),
                score=Score(id=f"traj-{number}", task_id=f"tool/{number % 3}", reward=float(passed), passed=passed),
                policy_version=number // 3,
            )
        )
    store.append(trajectories)
    return store.root


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class ReviewServer:
    """``veriloop review`` started as a real process on loopback."""

    def __init__(self, args: list[str], host: str = "127.0.0.1", token: str | None = None):
        self.port = free_port()
        self.host = host
        self.token = token
        command = [str(VERILOOP), "review", *args, "--port", str(self.port), "--host", host]
        if token:
            command += ["--token", token]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"veriloop review exited: {self.process.stderr.read()}")
            try:
                headers = {"Authorization": f"Bearer {token}"} if token else {}
                if httpx.get(self.url + "/api/stats", headers=headers, timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.1)
        raise RuntimeError("veriloop review did not start")

    def stop(self, kill: bool = False) -> None:
        if self.process.poll() is None:
            (self.process.kill if kill else self.process.terminate)()
            self.process.wait(timeout=20)


@pytest.fixture
def serve():
    """Start ``veriloop review ARGS`` servers; each is stopped at the end of the test."""
    started: list[ReviewServer] = []

    def start(*args: str, host: str = "127.0.0.1", token: str | None = None) -> ReviewServer:
        server = ReviewServer(list(args), host=host, token=token)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
