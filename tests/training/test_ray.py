"""The ``ray`` rollout backend on a real two-node Ray cluster: a head and a worker node, started
on this machine by ``ray start`` as two processes, shared by the module's tests.

The head has no CPUs, so every rollout actor lands on the worker node.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest
import torch

ray = pytest.importorskip("ray", reason="the ray rollout backend needs ray: pip install -e '.[dev]' (make setup)")

from veriloop.core import Task  # noqa: E402
from veriloop.rollout import EpisodeConfig, StopConfig, TrajectoryStore  # noqa: E402
from veriloop.training import RLTrainer, load_config  # noqa: E402
from veriloop.training._config import ModelSection, PipelineSection  # noqa: E402
from veriloop.training._model import load_policy  # noqa: E402
from veriloop.training._ray import RayBackend, RolloutWorkerLost, shard_bounds  # noqa: E402
from veriloop.training._rollout_worker import RolloutWorker, WorkerSpec, full_state  # noqa: E402

pytestmark = pytest.mark.scale

RAY = Path(sys.executable).with_name("ray")
# Loopback, but not 127.0.0.1: Ray rewrites that one to the host's routable address, and a
# second node could then not join a cluster on loopback.
HOST = "127.0.0.2"
START_TIMEOUT_S = 120


@dataclass(frozen=True)
class Cluster:
    address: str  # host:port of the head


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


def _ray_start(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    """``ray start --block ...`` in its own session: on SIGTERM it stops every process it started."""
    env = {key: value for key, value in os.environ.items() if key != "RAY_ADDRESS"}
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    with log.open("wb") as out:
        return subprocess.Popen(
            [
                str(RAY),
                "start",
                "--block",
                "--node-ip-address",
                HOST,
                "--object-store-memory",
                str(100 * 2**20),
                "--dashboard-agent-listen-port",
                str(_free_port()),
                *args,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )


def _wait_until(ready: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up waiting for {what} after {timeout_s:.0f} s")
        time.sleep(0.05)


def _accepts(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((HOST, port), timeout=1):
        return True
    return False


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=30)
    with contextlib.suppress(ProcessLookupError):  # whatever of its session is left: ours alone
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


@contextlib.contextmanager
def _ray_auth(**values: str) -> Iterator[None]:
    """``RAY_AUTH_*`` settings for this process and the nodes it starts, restored after."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    _reload_ray_auth()
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        _reload_ray_auth()


def _reload_ray_auth() -> None:
    """Make this process's Ray read the ``RAY_AUTH_*`` variables again (it reads them at import);
    what Ray's own tests do. Ray versions without token authentication have nothing to reload."""
    from ray import _raylet

    if hasattr(_raylet, "AuthenticationTokenLoader"):
        _raylet.Config.initialize("")
        _raylet.AuthenticationTokenLoader.instance().reset_cache()


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[Cluster]:
    # Its own token, for the nodes and this process (the driver): nothing else can use the
    # cluster, and a token Ray saved in ~/.ray for other clusters plays no part.
    with _ray_auth(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(16)):
        yield from _start_cluster()


def _start_cluster() -> Iterator[Cluster]:
    root = Path(tempfile.mkdtemp(prefix="vlray-", dir="/tmp"))  # short: Ray's socket paths must fit in 107 bytes
    port = _free_port()
    processes = [
        _ray_start(
            [
                "--head",
                "--port",
                str(port),
                "--num-cpus",
                "0",
                "--include-dashboard=false",
                "--ray-client-server-port",
                str(_free_port()),
                "--temp-dir",
                str(root),
            ],
            root / "head.log",
        )
    ]
    try:
        _wait_until(lambda: _accepts(port) or processes[0].poll() is not None, START_TIMEOUT_S, "the Ray head")
        assert processes[0].poll() is None, (root / "head.log").read_text(errors="replace")
        # The worker node may still be joining when a test starts: actors wait for its CPUs.
        # Three: two actors, and room for a replacement before a lost actor's CPU is released.
        processes.append(
            _ray_start(["--address", f"{HOST}:{port}", "--num-cpus", "3", "--temp-dir", str(root)], root / "worker.log")
        )
        yield Cluster(f"{HOST}:{port}")
    finally:
        for process in reversed(processes):
            _stop(process)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(autouse=True)
def _torch_threads() -> Iterator[None]:
    """One torch thread here, as in the actors: the worker node shares this machine's cores.
    (Numerics do not depend on it: MKL runs in strict mode.) The count is restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _spec(model_dir: Path, tools: tuple[str, ...] = ("python",), concurrency: int = 64) -> WorkerSpec:
    episode = EpisodeConfig(max_tokens_per_turn=12, tools=tools, stop=StopConfig(max_turns=2))
    return WorkerSpec(
        ModelSection(path=str(model_dir)),
        episode,
        max_batch_size=64,
        concurrency=concurrency,
        tools=tools,
        sandbox_workers=1,
        torch_threads=1,
    )


def _pipeline(cluster: Cluster, workers: int = 2, retries: int = 2) -> PipelineSection:
    return PipelineSection(
        backend="ray",
        ray_address=cluster.address,
        workers=workers,
        worker_cpus=1,
        worker_retries=retries,
        torch_threads=1,
    )


def _print_tasks(count: int) -> list[Task]:
    """Programs graded on their stdout: the verifier runs each answer in the sandbox."""
    return [
        Task(
            id=f"p{i}",
            domain="code",
            prompt=f"Write a Python program that prints {i}.",
            verifier={"kind": "stdio", "cases": [{"input": "", "output": str(i)}]},
        )
        for i in range(count)
    ]


def _sampled(trajectories: Any) -> list[dict[str, Any]]:
    """What sampling and scoring decided: everything but random ids and timings."""
    return [t.model_dump(exclude={"id": True, "timings": True, "score": {"id"}}) for t in trajectories]


def _nudged(model: Any) -> dict[str, torch.Tensor]:
    """A new version of every parameter, as an RL update would send it."""
    generator = torch.Generator().manual_seed(0)
    return {name: p.detach() + 0.02 * torch.randn(p.shape, generator=generator) for name, p in model.named_parameters()}


def _worker_node_id() -> str:
    [node] = [n["NodeID"] for n in ray.nodes() if n["Alive"] and "node:__internal_head__" not in n["Resources"]]
    return node


def _runs_sandbox(pid: int) -> bool:
    with contextlib.suppress(psutil.NoSuchProcess):
        return any(child.name() == "bwrap" for child in psutil.Process(pid).children(recursive=True))
    return False


def _local_rollout(
    spec: WorkerSpec, update: dict[str, torch.Tensor] | None, tasks: list[Task], group_size: int, seed: int
) -> Any:
    worker = RolloutWorker(spec)
    try:
        if update is not None:
            worker.set_weights(1, update)
        return worker.rollout(tasks, group_size, seed)
    finally:
        worker.close()


def test_shards_are_contiguous_balanced_and_cover_every_task():
    assert shard_bounds(7, 3) == [(0, 3), (3, 5), (5, 7)]
    assert shard_bounds(2, 4) == [(0, 1), (1, 2)]
    assert shard_bounds(0, 2) == []


@pytest.mark.determinism
def test_rollouts_run_on_the_worker_node_and_match_a_local_worker(ray_cluster, tiny_model_dir):
    """Sampled bit for bit like the local worker: shards see other batch shapes than the whole batch,
    and a sample must depend only on its seed (MKL in strict mode, veriloop.core._blas)."""
    spec = _spec(tiny_model_dir)
    tasks = _print_tasks(5)  # two actors: shards of 3 and 2 tasks
    model, _ = load_policy(spec.model)
    update = _nudged(model)
    expected = _local_rollout(spec, update, tasks, group_size=2, seed=11)
    backend = RayBackend(spec, _pipeline(ray_cluster), full_state(model))
    try:
        backend.set_weights(1, update)
        reported: list[tuple[int, int]] = []
        batch = backend.rollout(
            tasks, group_size=2, seed=11, progress=lambda done, total: reported.append((done, total))
        )
        placements = backend.placements()
        worker_node = _worker_node_id()
        sandboxed = [_runs_sandbox(p.pid) for p in placements]
    finally:
        backend.close()
    assert len(placements) == 2 and {p.node_id for p in placements} == {worker_node}
    assert os.getpid() not in {p.pid for p in placements}
    assert all(sandboxed)  # each actor's sandbox runs under its own process, on the worker node
    graded = [t for t in batch.trajectories if "your program" in t.score.detail]
    assert graded and all(t.score.status == "scored" for t in batch.trajectories)  # answers ran, in that sandbox
    assert backend.policy_version == 1 and {t.policy_version for t in batch.trajectories} == {1}
    assert batch.metrics.episodes == 10
    assert reported[-1] == (10, 10) and reported == sorted(reported)  # as shards come back
    assert _sampled(batch.trajectories) == _sampled(expected.trajectories)


@pytest.mark.determinism
def test_a_worker_killed_mid_batch_loses_nothing(ray_cluster, tiny_model_dir):
    # One episode at a time and no tools: a shard takes a while, and an actor starts its first
    # sandbox at its first verification, the sign that its shard is under way.
    spec = _spec(tiny_model_dir, tools=(), concurrency=1)
    tasks = _print_tasks(8)
    model, _ = load_policy(spec.model)
    expected = _local_rollout(spec, None, tasks, group_size=2, seed=5)
    backend = RayBackend(spec, _pipeline(ray_cluster), full_state(model))
    try:
        victim = backend.placements()[0]
        with ThreadPoolExecutor(max_workers=1) as pool:
            running = pool.submit(backend.rollout, tasks, 2, 5)
            _wait_until(
                lambda: _runs_sandbox(victim.pid) or running.done(), START_TIMEOUT_S, "the first shard to start"
            )
            assert not running.done()
            os.kill(victim.pid, signal.SIGKILL)
            batch = running.result(timeout=300)
        survivors = backend.placements()
    finally:
        backend.close()
    assert victim.pid not in {p.pid for p in survivors}
    assert [(t.task_id, t.sample_index) for t in batch.trajectories] == [
        (task.id, j) for task in tasks for j in range(2)
    ]
    assert _sampled(batch.trajectories) == _sampled(expected.trajectories)


def test_a_shard_lost_more_often_than_allowed_is_a_clear_error(ray_cluster, tiny_model_dir):
    spec = _spec(tiny_model_dir, tools=())
    model, _ = load_policy(spec.model)
    backend = RayBackend(spec, _pipeline(ray_cluster, workers=1, retries=0), full_state(model))
    try:
        os.kill(backend.placements()[0].pid, signal.SIGKILL)
        with pytest.raises(
            RolloutWorkerLost, match=r"tasks \[0:3\) was lost with 1 Ray workers.*pipeline.worker_retries"
        ):
            backend.rollout(_print_tasks(3), group_size=1, seed=0)
    finally:
        backend.close()


@pytest.mark.determinism
def test_training_with_ray_rollouts_matches_local_training(ray_cluster, tiny_model_dir, tmp_path, monkeypatch):
    """Sync local, sync on Ray, and async on Ray with max_staleness 0 (the sync algorithm exactly)
    sample the same completions and end at the same weights, bit for bit: the same algorithm on
    the same data, sampled in other batch shapes, which strict MKL makes irrelevant."""
    tasks = [
        Task(
            id=f"d{i}",
            domain="format",
            prompt=f"Write a digit, {i}.",
            verifier={"kind": "regex", "pattern": r"\d", "mode": "search"},
        )
        for i in range(8)
    ]
    common = [
        f"model.path={tiny_model_dir}",
        "rollout.prompts_per_step=3",
        "rollout.group_size=4",
        "rollout.max_tokens=8",
        "optim.lr=2e-3",
        "optim.warmup_steps=1",
        "run.steps=3",
        "run.checkpoint_every=0",
        "run.loggers=[jsonl]",
        "run.progress=false",
        "pipeline.torch_threads=1",
    ]
    on_ray = ["pipeline.backend=ray", f"pipeline.ray_address={ray_cluster.address}", "pipeline.workers=2"]
    variants = {"local": [], "ray": on_ray, "ray_async": [*on_ray, "pipeline.mode=async", "pipeline.max_staleness=0"]}
    ray_rollouts: list[tuple[Any, ...]] = []
    original = RayBackend.rollout

    def counted(self: RayBackend, *args: Any, **kwargs: Any) -> Any:
        ray_rollouts.append(args)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(RayBackend, "rollout", counted)
    runs = {}
    for name, extra in variants.items():
        out = tmp_path / name
        trainer = RLTrainer(load_config(None, [*common, f"run.out={out}", *extra]), tasks=tasks)
        history = trainer.train()
        runs[name] = (
            [m["reward/mean"] for m in history],
            _sampled(TrajectoryStore(out / "trajectories")),
            trainer.model.state_dict(),
        )
    assert len(ray_rollouts) >= 2 * 3  # both Ray runs sampled through the backend, each step at least once
    local_rewards, local_samples, local_weights = runs["local"]
    assert len(local_samples) >= 3 * 4 and len({s["policy_version"] for s in local_samples}) == 3
    for name in ("ray", "ray_async"):
        rewards, samples, weights = runs[name]
        assert samples == local_samples, name
        assert rewards == local_rewards, name
        for key, value in local_weights.items():
            assert torch.allclose(weights[key], value, rtol=1e-4, atol=1e-6), (name, key)


def test_a_plugin_kind_reaches_the_ray_actors(ray_cluster, plugin_config, tmp_path, monkeypatch):
    """The actors were started before the plugin existed: only the worker spec tells them to load it."""
    monkeypatch.setenv("VERILOOP_PLUGINS", "")  # what this test loads is not passed on to later tests
    out = tmp_path / "run"
    config = load_config(
        plugin_config,
        [
            f"run.out={out}",
            "pipeline.backend=ray",
            f"pipeline.ray_address={ray_cluster.address}",
            "pipeline.workers=2",
            "pipeline.torch_threads=1",
        ],
    )
    RLTrainer(config).train()
    scores = [t.score for t in TrajectoryStore(out / "trajectories")]
    assert len(scores) >= 2 * 4 and all(s.status == "scored" for s in scores)
    processes = {s.detail.rpartition(" ")[2] for s in scores}
    assert all(s.detail.startswith("has_digit_plugin in process") for s in scores)
    assert str(os.getpid()) not in processes  # verified inside the actors, not here
