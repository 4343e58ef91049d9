import pytest

from veriloop.core import Task, write_parquet

GOOD = '{"id": "%s", "domain": "%s", "prompt": "p", "verifier": {"kind": "exact"}, "gold": "x"}\n'


def test_truncated_line_and_unknown_kind_give_two_line_numbered_errors(tmp_path, run_cli):
    path = tmp_path / "tasks.jsonl"
    path.write_text(
        GOOD % ("a", "math")
        + '{"id": "b", "domain": "math", "prompt": "p", "verif\n'
        + '{"id": "c", "domain": "fmt", "prompt": "p", "verifier": {"kind": "telepathy"}}\n'
        + GOOD % ("d", "fmt")
    )
    result = run_cli("tasks", "validate", str(path))
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if ": line " in line]
    assert errors[0].startswith(f"{path}: line 2: malformed JSON")
    assert errors[1] == f"{path}: line 3: unknown verifier kind 'telepathy'; known: " + errors[1].split("known: ")[1]
    assert len(errors) == 2
    assert "Traceback" not in result.stderr


def test_all_problems_are_reported(tmp_path, run_cli):
    path = tmp_path / "tasks.jsonl"
    path.write_text(
        GOOD % ("a", "math")
        + GOOD % ("a", "math")
        + '{"id": "b", "prompt": "p", "verifier": {"kind": "exact"}}\n'
        + '{"id": "c", "domain": "d", "prompt": "p", "verifier": {"kind": "regex", "pattern": "(", "typo": 1}}\n'
    )
    result = run_cli("tasks", "validate", str(path))
    assert result.returncode == 2
    assert f"{path}: line 2: duplicate id 'a' (first on line 1)" in result.stderr
    assert f"{path}: line 3: missing field 'domain'" in result.stderr
    assert "line 4: regex verifier: field 'verifier.pattern': not a valid regular expression" in result.stderr
    assert "unknown field 'verifier.typo'" in result.stderr


def test_valid_file_prints_domain_counts(tmp_path, run_cli):
    path = tmp_path / "tasks.jsonl"
    path.write_text(GOOD % ("a", "math") + GOOD % ("b", "math") + GOOD % ("c", "code"))
    result = run_cli("tasks", "validate", str(path))
    assert result.returncode == 0, result.stderr
    assert "3 valid tasks" in result.stdout
    rows = {
        line.split("│")[1].strip(): line.split("│")[2].strip()
        for line in result.stdout.splitlines()
        if line.count("│") == 3
    }
    assert rows == {"code": "1", "math": "2"}


@pytest.mark.e2e
def test_parquet_task_file(tmp_path, run_cli):
    path = tmp_path / "tasks.parquet"
    write_parquet(path, [Task(id="a", domain="d", prompt="p", verifier={"kind": "exact"}, gold="x")])
    result = run_cli("tasks", "validate", str(path))
    assert result.returncode == 0, result.stderr


def test_missing_file_is_one_line_and_exit_2(tmp_path, run_cli):
    result = run_cli("tasks", "validate", str(tmp_path / "none.jsonl"))
    assert result.returncode == 2
    assert result.stderr.strip() == f"error: {tmp_path / 'none.jsonl'}: no such file"


def test_help_lists_commands(run_cli):
    result = run_cli("--help")
    assert result.returncode == 0
    assert "tasks" in result.stdout
