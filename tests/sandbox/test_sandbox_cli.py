"""``veriloop sandbox run`` and the argument checks of ``veriloop sandbox serve``."""

from __future__ import annotations

import json

import pytest


def _result(completed) -> dict:
    lines = completed.stdout.strip().splitlines()
    assert len(lines) == 1, completed.stdout + completed.stderr
    return json.loads(lines[0])


def test_run_prints_one_json_exec_result(run_cli):
    completed = run_cli("sandbox", "run", "--", "python3", "-c", "import os; print(2 + 2, os.getcwd())")
    assert completed.returncode == 0, completed.stderr
    result = _result(completed)
    assert result["status"] == "ok" and result["stdout"] == "4 /workspace\n"
    assert set(result) >= {"status", "exit_code", "stdout", "stderr", "wall_s"}


@pytest.mark.e2e
def test_run_reports_limits_as_statuses(run_cli):
    timed_out = run_cli("sandbox", "run", "--timeout", "1", "--", "sleep", "30")
    assert timed_out.returncode == 1 and _result(timed_out)["status"] == "timeout"
    flooded = run_cli("sandbox", "run", "--memory-mb", "64", "--", "python3", "-c", "x = bytearray(1 << 28)")
    assert _result(flooded)["status"] == "memory_limit"


def test_run_places_files_and_stdin(run_cli, tmp_path):
    source, feed = tmp_path / "a.txt", tmp_path / "in.txt"
    source.write_text("from a file\n")
    feed.write_text("from stdin\n")
    completed = run_cli(
        "sandbox",
        "run",
        "--file",
        f"data/a.txt={source}",
        "--stdin-file",
        str(feed),
        "--",
        "sh",
        "-c",
        "cat data/a.txt; cat",
    )
    assert _result(completed)["stdout"] == "from a file\nfrom stdin\n"


def test_run_with_network_opt_in_starts(run_cli):
    completed = run_cli("sandbox", "run", "--network", "--", "true")
    assert completed.returncode == 0 and _result(completed)["status"] == "ok"


@pytest.mark.e2e
def test_bad_arguments_exit_2_with_one_line(run_cli, tmp_path):
    for args in (
        ("sandbox", "run", "--timeout", "-1", "--", "true"),
        ("sandbox", "run", "--file", "no-equals-sign", "--", "true"),
        ("sandbox", "run", "--file", f"x={tmp_path / 'missing'}", "--", "true"),
        ("sandbox", "run", "--file", f"/abs={__file__}", "--", "true"),
    ):
        completed = run_cli(*args)
        assert completed.returncode == 2, (args, completed.stderr)
        assert completed.stderr.startswith("error: ") and "Traceback" not in completed.stderr


def test_serve_refuses_a_public_address_without_a_token(run_cli):
    completed = run_cli("sandbox", "serve", "--host", "0.0.0.0", "--port", "1")
    assert completed.returncode == 2
    assert "--token" in completed.stderr and "Traceback" not in completed.stderr


def test_help_lists_the_sandbox_commands(run_cli):
    completed = run_cli("sandbox", "--help")
    assert completed.returncode == 0 and "run" in completed.stdout and "serve" in completed.stdout
