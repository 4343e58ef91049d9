"""Modules a sandbox preloads: defined once before its first run, found already imported by every
run, read-only on disk, and changed by a run in that run's copy only."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from veriloop.core import UserError
from veriloop.sandbox import Limits, Sandbox, SandboxUnavailable

LIMITS = Limits(timeout_s=10, memory_mb=256)
MODULE = """
import os

COUNTER = [0]


def bump():
    COUNTER[0] += 1
    return COUNTER[0], os.getpid()
"""


@pytest.fixture(scope="module")
def preloading() -> Iterator[Sandbox]:
    try:
        box = Sandbox(limits=LIMITS, workers=1, preload={"vl_preloaded": MODULE})
    except SandboxUnavailable as exc:
        pytest.skip(f"no sandbox on this machine: {exc}")
    with box:
        yield box


def test_every_run_finds_the_module_already_imported(preloading):
    assert preloading.preloaded == {"vl_preloaded"}
    for _ in range(3):
        result = preloading.run_python("import sys\nprint('vl_preloaded' in sys.modules)\n")
        assert (result.status, result.stdout) == ("ok", "True\n"), result.stderr


def test_a_runs_change_to_the_module_stays_in_that_run(preloading):
    code = "import vl_preloaded\nvl_preloaded.bump()\nprint(vl_preloaded.bump()[0])\n"
    for _ in range(3):
        result = preloading.run_python(code)
        assert (result.status, result.stdout) == ("ok", "2\n"), result.stderr


def test_the_preloaded_source_cannot_be_changed_from_a_run(preloading):
    code = "open('/preload/vl_preloaded.py', 'a').write('COUNTER = None\\n')\n"
    result = preloading.run_python(code)
    assert result.status == "error" and "Read-only file system" in result.stderr
    after = preloading.run_python("import vl_preloaded\nprint(vl_preloaded.COUNTER)\n")
    assert after.stdout == "[0]\n"


def test_a_sandbox_without_preloads_has_none():
    try:
        with Sandbox(limits=LIMITS, workers=1) as plain:
            assert plain.preloaded == frozenset()
            result = plain.run_python("import vl_preloaded\n")
    except SandboxUnavailable as exc:
        pytest.skip(f"no sandbox on this machine: {exc}")
    assert result.status == "error" and "ModuleNotFoundError" in result.stderr


def test_a_preload_that_is_not_a_module_name_is_refused():
    with pytest.raises(UserError, match="module name"):
        Sandbox(limits=LIMITS, workers=1, preload={"../etc/passwd": "X = 1\n"})


def test_a_remote_sandbox_refuses_preloads():
    with pytest.raises(UserError, match="cannot preload"):
        Sandbox(backend="remote", url="http://127.0.0.1:9", preload={"vl_preloaded": MODULE})
