"""An environment's links and variables: checked when built, in the hash, and real in every run."""

from __future__ import annotations

import json

import pytest

from veriloop.core import Snapshot, UserError, snapshot_archive
from veriloop.sandbox import Sandbox, build_environment, check_links, check_variables, load_environment
from veriloop.sandbox import remove_environment

LINKS = {"/app": "/workspace", "/logs": "/tmp/logs", "/home/user/project": "/workspace/sub"}


@pytest.fixture(scope="module")
def laid_out(env_store):
    return build_environment("laid-out", links=LINKS, variables={"GREETING": "hello $NAME"})


def test_runs_see_the_links_and_variables(laid_out):
    files = {"sub/data.txt": b"inner\n", "top.txt": b"top\n"}
    script = (
        'cat /app/top.txt; cat /home/user/project/data.txt; echo "$GREETING"; cd /app && pwd; '
        "echo made > /app/new.txt; mkdir -p /tmp/logs/verifier && echo 1 > /logs/verifier/r.txt; "
        "cat /tmp/logs/verifier/r.txt; touch /elsewhere 2>/dev/null || echo read-only"
    )
    with Sandbox(workers=1, environment="laid-out") as sandbox:
        result = sandbox.run(["bash", "-c", script], snapshot=Snapshot(archive=snapshot_archive(files)), capture=True)
    assert result.ok, result
    assert result.stdout.split("\n")[:7] == ["top", "inner", "hello $NAME", "/app", "1", "read-only", ""]
    assert result.snapshot.files()["new.txt"] == b"made\n"  # written through /app into the workspace
    assert result.environment == laid_out.hash


def test_the_manifest_keeps_them_and_the_hash_counts_them(laid_out, env_store):
    manifest = json.loads((env_store / "laid-out.json").read_text())
    assert manifest["links"] == dict(sorted(LINKS.items())) and manifest["variables"] == {"GREETING": "hello $NAME"}
    assert load_environment("laid-out").links == laid_out.links
    other = build_environment("laid-out-2", links={**LINKS, "/app": "/workspace/sub"})
    try:
        assert other.hash != laid_out.hash
    finally:
        remove_environment("laid-out-2")


@pytest.mark.parametrize(
    ("links", "message"),
    [
        ({"app": "/workspace"}, "must be an absolute path"),
        ({"/app/../etc": "/workspace"}, "normal form"),
        ({"/": "/workspace"}, "system folders"),
        ({"/usr/src/app": "/workspace"}, "/usr is the sandbox's own"),
        ({"/workspace/app": "/workspace"}, "/workspace is the sandbox's own"),
        ({"/lib64": "/workspace"}, "system folders"),
        ({"/app": "/etc"}, "must be in /workspace or /tmp"),
        ({"/app": "/workspace", "/app/data": "/tmp/data"}, "overlaps the link /app"),
    ],
)
def test_links_that_would_reach_the_sandbox_s_own_places_are_refused(links, message):
    with pytest.raises(UserError, match=message):
        check_links(links)


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        ({"PATH": "/opt/bin"}, "the sandbox sets it"),
        ({"VERILOOP_X": "1"}, "the sandbox sets it"),
        ({"1X": "1"}, "a name is letters"),
        ({"X": "a\x00b"}, "without NUL"),
    ],
)
def test_variables_may_not_replace_the_sandbox_s_own(variables, message):
    with pytest.raises(UserError, match=message):
        check_variables(variables)


def test_the_cli_builds_links_and_variables(env_store, run_cli):
    built = run_cli("env", "build", "cli-laid", "--link", "/app=/workspace", "--variable", "MODE=test")
    assert built.returncode == 0, built.stderr
    assert load_environment("cli-laid").links == {"/app": "/workspace"}
    ran = run_cli("sandbox", "run", "--env", "cli-laid", "--", "bash", "-c", "cd /app && pwd && echo $MODE")
    assert json.loads(ran.stdout)["stdout"] == "/app\ntest\n"
    bad = run_cli("env", "build", "cli-bad", "--link", "/usr/x=/workspace")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "/usr is the sandbox's own" in bad.stderr
    remove_environment("cli-laid")
