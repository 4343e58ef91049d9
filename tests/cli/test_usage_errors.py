"""Usage errors, whichever click raised them (typer ships its own copy): one line, exit 2, a pointer to --help."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    "args, message",
    [
        (["evl"], "No such command 'evl'"),
        (["eval", "--bogus"], "No such option: --bogus"),
        (["eval", "--tasks", "t.jsonl", "--out", "o"], "Missing option '--model'"),
        (["tasks", "validate"], "Missing argument"),
        (["eval", "--model", "m", "--tasks", "t", "--out", "o", "--samples", "abc"], "valid integer"),
        (["eval", "--model", "m", "--tasks", "t", "--out", "o", "--samples", "0"], "greater than or equal to 1"),
    ],
    ids=["unknown-command", "unknown-option", "missing-option", "missing-argument", "bad-integer", "out-of-range"],
)
def test_a_usage_error_is_one_line_and_exit_2(run_cli, args, message):
    done = run_cli(*args)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], done.stderr
    assert "--help" in lines[0] and "Traceback" not in done.stderr


def test_a_bare_command_group_prints_its_help(run_cli):
    done = run_cli("tasks")
    assert done.returncode == 0 and "validate" in done.stdout
