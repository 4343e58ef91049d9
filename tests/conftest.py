"""Shared fixtures: the project's own ``veriloop`` executable and a runner for it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

VERILOOP = Path(sys.executable).with_name("veriloop")


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
    from veriloop.tasks._cad_parts import CAD_ENVIRONMENT_PACKAGES

    return build_environment("cad", list(CAD_ENVIRONMENT_PACKAGES))
