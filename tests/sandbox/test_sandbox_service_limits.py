"""The service's limits: ``/v1/exec`` and ``/run_code`` enforce the Limits the Python API does,
never more than the service's own, CPU time included; checked against a real ``veriloop sandbox serve``."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from veriloop.core import ExecResult
from veriloop.sandbox import Limits

VERILOOP = Path(sys.executable).with_name("veriloop")
CEILING_S = 8  # the service's --timeout: wall and CPU seconds a request may ask for at most
RLIMIT_CPU = "import resource; print(*resource.getrlimit(resource.RLIMIT_CPU))"


@pytest.fixture(scope="module")
def service(sandbox_server) -> Iterator[str]:
    with sandbox_server(token=None, workers=1, timeout_s=CEILING_S) as url:
        yield url


def _exec(service: str, code: str, **limits: float) -> ExecResult:
    body = {"kind": "python", "code": code, "limits": limits}
    response = httpx.post(f"{service}/v1/exec", json=body, timeout=60)
    assert response.status_code == 200, response.text
    return ExecResult.model_validate_json(response.content)


def _rlimit_cpu(result: ExecResult) -> tuple[int, int]:
    assert result.ok, result.detail
    soft, hard = result.stdout.split()
    return int(soft), int(hard)


def test_exec_cannot_ask_for_more_cpu_time_than_the_service_allows(service):
    """The wall limit alone would let a request's threads use CPU time far beyond it."""
    asked = {"timeout_s": CEILING_S, "cpu_s": 3600}
    assert _rlimit_cpu(_exec(service, RLIMIT_CPU, **asked)) == (CEILING_S, CEILING_S + 1)
    assert _rlimit_cpu(_exec(service, RLIMIT_CPU, timeout_s=2, cpu_s=3600)) == (CEILING_S, CEILING_S + 1)


def test_exec_cpu_time_defaults_and_bounds_match_the_api_and_run_code(service, sandbox):
    assert _rlimit_cpu(_exec(service, RLIMIT_CPU, timeout_s=2)) == (2, 3)  # unset: the wall limit
    assert _rlimit_cpu(_exec(service, RLIMIT_CPU, timeout_s=2, cpu_s=1)) == (1, 2)  # lower: as asked
    assert _rlimit_cpu(_exec(service, RLIMIT_CPU, timeout_s=60)) == (CEILING_S, CEILING_S + 1)
    assert _rlimit_cpu(_exec(service, RLIMIT_CPU)) == (CEILING_S, CEILING_S + 1)  # Limits' default, 10 s, is over it
    fusion = httpx.post(f"{service}/run_code", json={"code": RLIMIT_CPU, "run_timeout": 2}, timeout=60).json()
    assert fusion["run_result"]["stdout"] == "2 3\n"
    api = sandbox.run_python(RLIMIT_CPU, limits=Limits(timeout_s=2))
    assert api.stdout == "2 3\n"


@pytest.mark.e2e
def test_a_cpu_bound_request_with_a_small_limit_ends_as_the_api_says(service, sandbox):
    small = {"timeout_s": CEILING_S, "cpu_s": 1}
    remote = _exec(service, "while True: pass", **small)
    local = sandbox.run_python("while True: pass", limits=sandbox.limits.model_copy(update=small))
    assert (remote.status, remote.detail) == (local.status, local.detail) == ("timeout", "CPU time limit of 1s reached")
    assert remote.wall_s < CEILING_S  # ended by its CPU limit, not by the wall
