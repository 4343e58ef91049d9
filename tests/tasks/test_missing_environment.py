"""Tasks whose environment is not built: the message says so and gives the exact build command."""

from __future__ import annotations

from veriloop.core import write_jsonl
from veriloop.sandbox._environments import ENV_DIR_VARIABLE
from veriloop.tasks import CAD_ENVIRONMENT_PACKAGES, check_task_file, generate_tasks


def test_generating_cad_tasks_without_their_environment_names_the_build_command(tmp_path, run_cli, monkeypatch):
    (tmp_path / "envs").mkdir()
    monkeypatch.setenv(ENV_DIR_VARIABLE, str(tmp_path / "envs"))  # an empty store: nothing is built
    out = tmp_path / "cad.jsonl"
    done = run_cli("tasks", "generate", "cad", "--seed", "1", "--size", "2", "--out", str(out))
    assert done.returncode == 2 and not out.exists()
    assert "environment 'cad' is not built" in done.stderr, done.stderr
    assert "`veriloop env build cad manifold3d trimesh numpy`" in done.stderr
    assert "gold answer fails" not in done.stderr and "Traceback" not in done.stderr
    renamed = run_cli(
        "tasks", "generate", "cad", "--seed", "1", "--size", "1", "--environment", "parts", "--out", str(out)
    )
    assert "`veriloop env build parts manifold3d trimesh numpy`" in renamed.stderr, renamed.stderr


def test_validating_a_task_file_reports_the_missing_environment_once_per_row(tmp_path, monkeypatch):
    (tmp_path / "envs").mkdir()
    monkeypatch.setenv(ENV_DIR_VARIABLE, str(tmp_path / "envs"))
    tasks = generate_tasks("cad", seed=2, size=2) + generate_tasks("arithmetic", seed=2, size=2)
    write_jsonl(tmp_path / "mixed.jsonl", tasks)
    result = check_task_file(tmp_path / "mixed.jsonl", gold=True)
    command = f"veriloop env build cad {' '.join(CAD_ENVIRONMENT_PACKAGES)}"
    assert len(result.errors) == 2 and all("gold answer not checked" in e and command in e for e in result.errors)
    assert [e.split(": ")[1] for e in result.errors] == ["line 1", "line 2"]  # the arithmetic rows pass
