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
