"""Environments: built from packages, mounted read-only, pre-imported, hashed on every result."""

from __future__ import annotations

from pathlib import Path

import pytest

from veriloop.core import UserError
from veriloop.sandbox import Sandbox
from veriloop.sandbox._environments import (
    build_environment,
    list_environments,
    load_environment,
    remove_environment,
)


@pytest.fixture(scope="module")
def local_environment(env_store, make_wheel, tmp_path_factory):
    wheel = make_wheel(tmp_path_factory.mktemp("wheels"), "vl_marker_pkg", 41)
    environment = build_environment("marker", [str(wheel)])
    return environment, wheel


def test_a_built_environment_is_listed_hashed_and_pre_imported(local_environment):
    environment, _ = local_environment
    assert len(environment.hash) == 64 and environment.warm == ("vl_marker_pkg",)
    assert any(e.name == "marker" and e.hash == environment.hash for e in list_environments())
    with Sandbox(workers=1, environment="marker") as sandbox:
        warm = sandbox.run_python(
            "import sys\nprint('vl_marker_pkg' in sys.modules)\nimport vl_marker_pkg\nprint(vl_marker_pkg.VALUE)"
        )
        fresh = sandbox.run(["python", "-c", "import vl_marker_pkg, sys; print(vl_marker_pkg.VALUE, sys.prefix)"])
    assert warm.ok and warm.stdout.split() == ["True", "41"], warm
    assert warm.environment == environment.hash
    assert fresh.ok and fresh.stdout.split() == ["41", environment.path], fresh


def test_nothing_in_an_environment_can_be_written(local_environment):
    environment, _ = local_environment
    module = (
        f"{environment.path}/lib/python{environment.python_version.rsplit('.', 1)[0]}/site-packages/vl_marker_pkg.py"
    )
    code = f"open({module!r}, 'w').write('VALUE = 0')"
    with Sandbox(workers=1, environment="marker") as sandbox:
        result = sandbox.run_python(code)
        after = sandbox.run_python("import vl_marker_pkg\nprint(vl_marker_pkg.VALUE)")
    assert result.status == "error" and "Read-only file system" in result.stderr, result
    assert after.stdout.strip() == "41"
    assert Path(module).read_text() == "VALUE = 41\n"


def test_the_same_files_give_the_same_hash(local_environment):
    environment, wheel = local_environment
    again = build_environment("marker-copy", [str(wheel)])
    try:
        assert again.hash == environment.hash and again.path != environment.path
    finally:
        remove_environment("marker-copy")
    with pytest.raises(UserError, match="not built"):
        load_environment("marker-copy")


def test_another_package_gives_another_hash(local_environment, make_wheel, tmp_path):
    environment, _ = local_environment
    other = build_environment("other", [str(make_wheel(tmp_path, "vl_marker_pkg", 42))])
    try:
        assert other.hash != environment.hash
    finally:
        remove_environment("other")
    assert not Path(other.path).exists()


def test_a_missing_environment_names_the_build_command(env_store, run_cli):
    with pytest.raises(UserError, match=r"veriloop env build absent --packages"):
        Sandbox(workers=1, environment="absent")
    done = run_cli("sandbox", "run", "--env", "absent", "--", "true")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "veriloop env build absent" in done.stderr


def test_bad_names_and_failed_installs_are_one_line_errors(env_store, run_cli):
    with pytest.raises(UserError, match="environment name"):
        build_environment("../up", ["x"])
    done = run_cli("env", "build", "broken", "--packages", "/nonexistent/wheel-0-py3-none-any.whl")
    assert done.returncode == 2 and "could not install the packages" in done.stderr
    assert not any(p.name.startswith("broken") for p in env_store.iterdir())


@pytest.mark.e2e
def test_the_cli_lists_and_removes(local_environment, make_wheel, run_cli, tmp_path):
    wheel = make_wheel(tmp_path, "vl_cli_pkg", 1)
    built = run_cli("env", "build", "cli-env", "--packages", str(wheel))
    assert built.returncode == 0, built.stderr
    digest = built.stdout.strip()
    listed = run_cli("env", "list")
    assert f"cli-env\t{digest[:12]}" in listed.stdout
    assert run_cli("env", "rm", "cli-env").returncode == 0
    assert "cli-env" not in run_cli("env", "list").stdout
    assert run_cli("env", "rm", "cli-env").returncode == 2
