"""Plugins reach every process: by module name, by file path, through the environment, through entry points.

Each case runs in a fresh interpreter (a plugin, once imported, stays imported).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from veriloop.core import UserError, resolve_plugin

pytestmark = pytest.mark.e2e

PLUGIN = textwrap.dedent("""
    from veriloop.algorithms import ADVANTAGE_ESTIMATORS

    @ADVANTAGE_ESTIMATORS.register("{name}")
    def estimator(rewards, group_size, eps=1e-6):
        return rewards - rewards.mean()
""")

REPORT = (
    "import json, os, sys; from veriloop.core import load_plugins; from veriloop.algorithms import ADVANTAGE_ESTIMATORS;"
    "loaded = load_plugins(sys.argv[1:]);"
    "print(json.dumps({'loaded': loaded, 'known': ADVANTAGE_ESTIMATORS.names(), 'env': os.environ.get('VERILOOP_PLUGINS', '')}))"
)


def _run(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "VERILOOP_PLUGINS"}
    environment.update(env)
    return subprocess.run(
        [sys.executable, "-c", REPORT, *args], capture_output=True, text=True, cwd=cwd, env=environment, timeout=120
    )


def _report(args: list[str], cwd: Path, **env: str) -> dict:
    done = _run(args, cwd, **env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_a_file_plugin_registers_and_is_passed_on_to_child_processes(tmp_path):
    (tmp_path / "my_estimators.py").write_text(PLUGIN.format(name="centred"))
    first = _report(["my_estimators.py"], tmp_path)
    path = str((tmp_path / "my_estimators.py").resolve())
    assert "centred" in first["known"] and first["loaded"] == [path] and first["env"] == path
    child = _report([], Path("/"), VERILOOP_PLUGINS=first["env"])  # another directory: the absolute path still loads
    assert "centred" in child["known"]


def test_a_module_plugin_on_the_path(tmp_path):
    package = tmp_path / "mykinds"
    package.mkdir()
    (package / "__init__.py").write_text(PLUGIN.format(name="by_module"))
    result = _report(["mykinds"], tmp_path, PYTHONPATH=str(tmp_path))
    assert "by_module" in result["known"] and result["env"] == "mykinds"


def test_an_installed_distribution_entry_point_is_loaded_without_being_named(tmp_path):
    (tmp_path / "ep_kinds.py").write_text(PLUGIN.format(name="from_entry_point"))
    dist = tmp_path / "ep_kinds-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ep-kinds\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[veriloop.plugins]\nkinds = ep_kinds\n")
    result = _report([], tmp_path, PYTHONPATH=str(tmp_path))
    assert "from_entry_point" in result["known"] and "ep_kinds" in result["loaded"]
    assert result["env"] == ""  # every process finds entry points itself


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "no such file"),
        ("raise RuntimeError('broken on purpose')", "could not import it: RuntimeError: broken on purpose"),
    ],
)
def test_a_bad_plugin_is_a_user_error_naming_it(tmp_path, content, message):
    if content is not None:
        (tmp_path / "bad.py").write_text(content)
    done = _run(["bad.py"], tmp_path)
    assert (
        done.returncode != 0
        and "UserError: plugin " in done.stderr
        and "bad.py" in done.stderr
        and message in done.stderr
    )


def test_an_unimportable_module_says_how_to_name_it(tmp_path):
    done = _run(["no_such_plugin_module"], tmp_path)
    assert "plugin no_such_plugin_module" in done.stderr and "path of its .py file" in done.stderr


def test_file_paths_resolve_against_the_given_base(tmp_path):
    (tmp_path / "kinds.py").write_text("")
    assert resolve_plugin("kinds.py", base=tmp_path) == str((tmp_path / "kinds.py").resolve())
    assert resolve_plugin("some.module") == "some.module"
    with pytest.raises(UserError, match="no such file"):
        resolve_plugin("missing.py", base=tmp_path)


def test_check_processes_load_the_parents_plugins(tmp_path):
    """A check that lives in a plugin file (not importable by name) runs in the killable check pool."""
    (tmp_path / "slow_checks.py").write_text("def double(request):\n    return 2 * request\n")
    code = (
        "import sys; from veriloop.core import load_plugins;"
        "from veriloop.verifiers.answers._check_pool import CheckPool;"
        f"load_plugins([{str(tmp_path / 'slow_checks.py')!r}]); pool = CheckPool('slow_checks:double', size=1);"
        "print(pool.call(21, timeout_s=60)); pool.close()"
    )
    environment = {k: v for k, v in os.environ.items() if k != "VERILOOP_PLUGINS"}
    # From another directory: the check process (python -m, which puts its cwd on sys.path) could
    # not import the plugin by name.
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd="/", env=environment, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["42"]
