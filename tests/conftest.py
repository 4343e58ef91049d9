"""Shared fixtures: the project's own ``veriloop`` executable and a runner for it."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

VERILOOP = Path(sys.executable).with_name("veriloop")
SERVICE_TOKEN = "test-token-" + "x" * 16


_SESSION: list[pytest.Session] = []


def pytest_sessionfinish(session: pytest.Session) -> None:
    _SESSION.append(session)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """End the test process once its results are reported and its exit handlers have run,
    without the interpreter's final teardown. On an AMD EPYC machine a full run once ended in a
    segmentation fault after its summary (1,401 passed), in a thread of a C++ library
    (``std::_Hash_bytes`` in libstdc++) while the interpreter tore its modules down; the thread
    and library are not identified yet. The exit status stays the session's."""
    if not _SESSION:
        return
    import atexit
    import os

    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(int(_SESSION[-1].exitstatus))


def pytest_configure(config: pytest.Config) -> None:
    """A pytest-xdist worker computes with one torch thread: the workers together already fill the
    cores, and two threads each would only make them wait on each other."""
    import os

    if os.environ.get("PYTEST_XDIST_WORKER"):
        import torch

        torch.set_num_threads(1)


# Session fixtures that train a model before the tests that use them: those tests are end-to-end
# (`make test-fast` leaves them out) wherever they live.
TRAINS_A_MODEL = frozenset({"scripted_engine"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if TRAINS_A_MODEL & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.e2e)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def serve_sandbox(*options: str, token: str | None, workers: int = 2, timeout_s: float = 5) -> Iterator[str]:
    """A real ``veriloop sandbox serve`` on a free loopback port; yields its URL once it answers."""
    port = _free_port()
    args = [str(VERILOOP), "sandbox", "serve", "--port", str(port), "--workers", str(workers)]
    args += ["--timeout", str(timeout_s), *options]
    server = subprocess.Popen([*args, *(["--token", token] if token else [])], stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        for _ in range(300):
            if server.poll() is not None:
                pytest.fail(f"the sandbox service did not start: {server.stderr.read().decode()[-500:]}")
            try:
                if httpx.get(f"{url}/v1/ping", headers=headers, timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.fixture(scope="session")
def sandbox_server():
    """``sandbox_server(*options, token=...)``: a context manager around a real sandbox service."""
    return serve_sandbox


@pytest.fixture(scope="module")
def sandbox_service() -> Iterator[tuple[str, str]]:
    """A sandbox service that needs a token: ``(url, token)``."""
    with serve_sandbox(token=SERVICE_TOKEN) as url:
        yield url, SERVICE_TOKEN


@pytest.fixture
def run_cli():
    """Run the installed ``veriloop`` command; returns the CompletedProcess (text mode)."""

    def run(*args: str, input: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(VERILOOP), *args], capture_output=True, text=True, input=input, timeout=timeout)

    return run


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A freshly initialised tiny Qwen2 model and tokenizer, built locally once per test run."""
    from veriloop.training import init_tiny_model

    return init_tiny_model(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture(scope="session")
def tiny_engine(tiny_model_dir):
    from veriloop.rollout import create_engine

    return create_engine("hf", model=str(tiny_model_dir))


@pytest.fixture(scope="session")
def env_store():
    """A private environment store for this test run (reachable by the sandbox's unprivileged
    user, as the store must be), set as ``VERILOOP_ENV_DIR`` for the session."""
    import os
    import shutil
    import tempfile

    from veriloop.sandbox._environments import ENV_DIR_VARIABLE

    root = Path(tempfile.mkdtemp(prefix="veriloop-envs-", dir="/tmp"))
    root.chmod(0o755)
    previous = os.environ.get(ENV_DIR_VARIABLE)
    os.environ[ENV_DIR_VARIABLE] = str(root)
    yield root
    if previous is None:
        os.environ.pop(ENV_DIR_VARIABLE, None)
    else:
        os.environ[ENV_DIR_VARIABLE] = previous
    shutil.rmtree(root, ignore_errors=True)


def hand_made_wheel(folder: Path, name: str, value: int) -> Path:
    """A pure-Python wheel of one module ``name`` whose VALUE is ``value``, made by hand (no registry)."""
    import base64
    import hashlib
    import zipfile

    dist = f"{name}-1.0.dist-info"
    contents = {
        f"{name}.py": f"VALUE = {value}\n",
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{dist}/top_level.txt": f"{name}\n",
    }
    record = []
    for path, text in contents.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    contents[f"{dist}/RECORD"] = "\n".join(record + [f"{dist}/RECORD,,"]) + "\n"
    wheel = folder / f"{name}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in contents.items():
            archive.writestr(path, text)
    return wheel


@pytest.fixture(scope="session")
def make_wheel():
    """``make_wheel(folder, name, value)``: a hand-made wheel of one module ``name`` (``VALUE = value``)."""
    return hand_made_wheel


@pytest.fixture(scope="session")
def wheel_environment(env_store, tmp_path_factory):
    """An environment named ``vl-wheel`` built from one hand-made wheel (module ``vl_wheel_pkg``,
    ``VALUE = 7``): no registry needed."""
    from veriloop.sandbox._environments import build_environment

    return build_environment("vl-wheel", [str(hand_made_wheel(tmp_path_factory.mktemp("wheels"), "vl_wheel_pkg", 7))])


@pytest.fixture(scope="session")
def env_with_pytest(env_store):
    """An environment named ``pytest`` with pytest installed from the package registry, built
    once per test run (the environment that terminal-coding tasks name)."""
    from veriloop.sandbox._environments import build_environment

    return build_environment("pytest", ["pytest"])


@pytest.fixture(scope="session")
def env_with_cad(env_store):
    """The environment ``cad`` tasks name (manifold3d, trimesh, numpy from the package
    registry), built once per test run."""
    from veriloop.sandbox._environments import build_environment
    from veriloop.tasks.generators._cad_parts import CAD_ENVIRONMENT_PACKAGES

    return build_environment("cad", list(CAD_ENVIRONMENT_PACKAGES))


def _openenv_server_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("openenv_server", Path(__file__).with_name("openenv_server.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def guess_server():
    """``guess``, a small OpenEnv environment (``tests/openenv_server.py``) served on loopback for
    one test; its ``url`` is the address tasks name, ``sessions`` counts the sessions opened."""
    with _openenv_server_module().GuessServer() as server:
        yield server


@pytest.fixture
def weak_guess_server():
    """Serves a deliberately weak variant of ``guess`` on loopback for one test:
    ``weak_guess_server("trusting")`` takes an action's word for its own outcome,
    ``weak_guess_server("fragile")`` validates nothing and fails on wrong types and huge numbers."""
    from contextlib import ExitStack

    module = _openenv_server_module()
    environments = {"trusting": module.TrustingGuessEnvironment, "fragile": module.FragileGuessEnvironment}
    with ExitStack() as stack:
        yield lambda weakness: stack.enter_context(module.GuessServer(environments[weakness]))


@pytest.fixture(scope="session")
def env_with_verifiers(env_store, tmp_path_factory):
    """The environment ``verifiers-sums``: ``verifiers`` 0.4.0 from the package registry and the
    taskset of ``examples/verifiers/veriloop-sums`` (copied first: pip builds in its folder),
    ``verifiers.v1`` pre-imported; built once per test run."""
    import shutil

    from veriloop.sandbox._environments import build_environment

    source = Path(__file__).parents[1] / "examples" / "verifiers" / "veriloop-sums"
    package = tmp_path_factory.mktemp("taskset") / "veriloop-sums"
    shutil.copytree(source, package, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    return build_environment(
        "verifiers-sums", ["verifiers==0.4.0", str(package)], warm=["verifiers.v1", "veriloop_sums"]
    )
