"""``terminal-repos``: seeded repositories whose defect fails their tests and whose gold fixes it.

The pytest runs are real: each repository is written to a temporary directory and the host's
pytest runs there, with the hidden tests added, before and after the gold fix (and, at
difficulty 2, after the decoy fix, which must break something the hidden tests check).
"""

from __future__ import annotations

import ast
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from veriloop.core import Task, UserError
from veriloop.tasks import GENERATORS, generate_tasks
from veriloop.tasks.generators._terminal_repos import (
    LEVELS,
    THEMES,
    VISIBLE_TEST,
    TerminalReposOptions,
    draw_repo,
    index_calls,
    terminal_repo_records,
    tuple_returns,
)

HAS_WORKSPACE = "workspace" in Task.model_fields
needs_workspace = pytest.mark.skipif(not HAS_WORKSPACE, reason="Task has no workspace field yet (sandbox environments)")
FIELDS = {"id", "domain", "difficulty", "metadata", "environment", "workspace", "prompt", "verifier", "gold"}


def records(seed: int, size: int, difficulty: int) -> list[dict]:
    return terminal_repo_records(TerminalReposOptions(seed=seed, size=size, difficulty=difficulty))


@pytest.fixture(scope="module")
def drawn() -> list[dict]:
    """Three repositories of each difficulty (nine pytest runs of the visible tests)."""
    return [record for difficulty in (1, 2, 3) for record in records(11, 3, difficulty)]


def run_pytest(tmp_path: Path, *layers: dict[str, str]) -> tuple[int, set[str]]:
    """Write ``layers`` (later ones win) to a fresh directory, run pytest there: exit code and failed files."""
    root = tmp_path / f"run{len(list(tmp_path.iterdir()))}"
    for layer in layers:
        for path, text in layer.items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(text, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")} | {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    argv = [sys.executable, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider"]
    run = subprocess.run(argv, cwd=root, capture_output=True, text=True, timeout=120, env=env)
    failed = set(re.findall(r"^(?:FAILED|ERROR) (tests/[\w/]+\.py)", run.stdout, re.MULTILINE))
    return run.returncode, failed


def test_records_have_exactly_the_task_fields(drawn):
    for record in drawn:
        assert set(record) == FIELDS
        assert record["domain"] == "terminal-coding" and record["environment"] == "pytest"
        assert record["difficulty"] == float(record["metadata"]["level"])
        assert record["metadata"]["difficulty_name"] == LEVELS[record["metadata"]["level"]].name
        assert record["metadata"]["seed"] == 11 and record["metadata"]["defect"]
        assert record["verifier"]["kind"] == "workspace_tests"
        assert record["verifier"]["command"] == ["python", "-m", "pytest", "-q"]
        hidden = record["verifier"]["files"]
        assert len(hidden) >= 2 and all(re.fullmatch(r"tests/test_hidden_\w+\.py", path) for path in hidden)
        assert not set(hidden) & set(record["workspace"])
        assert [p for p in record["workspace"] if p.startswith("tests/")] == [VISIBLE_TEST]
        changed = record["gold"]["workspace"]
        assert changed and all(record["workspace"][path] != text for path, text in changed.items())
    assert {r["metadata"]["level"] for r in drawn} == {1, 2, 3}
    assert all(("decoy_fix" in r["metadata"]) == (r["metadata"]["level"] == 2) for r in drawn)


@pytest.mark.e2e
def test_same_seed_same_records_other_seed_other_repositories(drawn):
    from veriloop.tasks.generators._terminal_repos import _visible_failure

    _visible_failure.cache_clear()  # rerun pytest, so its output is compared too
    again = records(11, 3, 2)
    assert [{key for key in record if record[key] != drawn[3 + i][key]} for i, record in enumerate(again)] == [
        set()
    ] * 3
    assert again == drawn[3:6]
    assert records(11, 1, 2) == drawn[3:4]  # a task does not depend on the size of the set
    other = records(12, 3, 2)
    assert [r["workspace"] for r in other] != [r["workspace"] for r in drawn[3:6]]
    assert len({r["prompt"] for r in drawn}) == len(drawn)


@pytest.mark.e2e
def test_the_defect_fails_hidden_tests_and_the_gold_fixes_it(drawn, tmp_path):
    for record in drawn:
        hidden = record["verifier"]["files"]
        code, failed = run_pytest(tmp_path, record["workspace"], hidden)
        assert code != 0 and VISIBLE_TEST in failed, record["id"]
        assert failed & set(hidden), f"{record['id']}: only the visible test catches {record['metadata']['defect']}"
        code, failed = run_pytest(tmp_path, record["workspace"], record["gold"]["workspace"], hidden)
        assert code == 0, (record["id"], failed)


@pytest.mark.e2e
def test_the_decoy_fix_passes_the_visible_test_and_breaks_another(drawn, tmp_path):
    for record in [r for r in drawn if r["metadata"]["level"] == 2]:
        decoy = record["metadata"]["decoy_fix"]
        assert decoy and not set(decoy) & set(record["gold"]["workspace"])
        code, failed = run_pytest(tmp_path, record["workspace"], decoy, record["verifier"]["files"])
        assert VISIBLE_TEST not in failed and failed, (record["id"], failed)


def test_the_prompt_shows_the_failure_and_no_hidden_test(drawn):
    for record in drawn:
        prompt = record["prompt"]
        assert record["workspace"][VISIBLE_TEST] in prompt
        assert "FAILED tests/test_visible.py::" in prompt or "ERROR tests/test_visible.py" in prompt
        assert "/tmp" not in prompt and not re.search(r"0x[0-9a-f]{6,}", prompt)
        assert all(path in prompt for path in record["workspace"])
        for text in record["verifier"]["files"].values():
            for node in ast.parse(text).body:
                if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                    assert f"def {node.name}(" not in prompt, (record["id"], node.name)
                    assert ast.get_source_segment(text, node) not in prompt


def test_difficulty_3_states_the_change():
    statements = []
    for seed in range(6):
        repo = draw_repo(THEMES[seed % len(THEMES)], random.Random(seed))
        for target in LEVELS[3].choices(repo):
            statements.append(LEVELS[3].draft(repo, target, random.Random(0)).statement)
    assert any(s.startswith("Rename the function") for s in statements)
    assert any("returns a `(value, unit)` tuple" in s for s in statements)


def test_every_theme_offers_every_difficulty_in_every_layout():
    for theme in THEMES:
        for seed in range(40):
            repo = draw_repo(theme, random.Random(seed))
            for level in LEVELS.values():
                assert level.choices(repo), (theme.name, seed, level.name)


def test_templates_are_ascii_and_every_bug_has_a_visible_test():
    for theme in THEMES:
        for unit in theme.units:
            assert (unit.source + unit.tests + unit.visible).isascii(), unit.slot
            assert not unit.bugs or unit.visible, unit.slot
        for misuse in theme.misuses:
            assert {misuse.caller, misuse.helper} <= {unit.slot for unit in theme.units}


def test_seeds_vary_themes_names_and_layouts():
    repos = [draw_repo(THEMES[0], random.Random(seed)) for seed in range(30)]
    assert len({repo.package for repo in repos}) > 1
    assert len({tuple(repo.modules.values()) for repo in repos}) > 1
    assert len({tuple(sorted(repo.homes.items())) for repo in repos}) > 1
    assert len({repo.order for repo in repos}) > 1


def test_index_calls_and_tuple_returns_rewrite_by_position():
    source = 'def f(x):\n    if x:\n        return g(x) + 1\n    return 0 if x is None else -1\n\n\ndef h(y):\n    return f"{f(y)} and {f(f(y))}"\n'
    rewritten = index_calls(tuple_returns(source, "f", "cm"), "f")
    assert rewritten == (
        'def f(x):\n    if x:\n        return g(x) + 1, "cm"\n    return (0 if x is None else -1), "cm"\n\n\n'
        'def h(y):\n    return f"{f(y)[0]} and {f(f(y)[0])[0]}"\n'
    )
    tests = "def test_a():\n    assert mod.f(2) == 3\n\n\ndef test_b():\n    value, unit = mod.f(2)\n"
    assert index_calls(tests, "f", "mod", keep="test_b") == tests.replace("mod.f(2) ==", "mod.f(2)[0] ==")


def test_bad_options_are_user_errors():
    source = GENERATORS.get("terminal-repos")
    with pytest.raises(UserError, match="--difficulty"):
        source.parse_options({"seed": 1, "size": 2, "difficulty": 4})
    with pytest.raises(UserError, match="unknown option --themes"):
        source.parse_options({"seed": 1, "size": 2, "themes": "bank"})


@needs_workspace
def test_records_are_tasks(drawn):
    tasks = generate_tasks("terminal-repos", seed=11, size=3, difficulty=1)
    assert [task.model_dump(exclude_none=True) for task in tasks] == [
        Task.model_validate(record).model_dump(exclude_none=True) for record in drawn[:3]
    ]
    assert tasks[0].workspace == drawn[0]["workspace"] and tasks[0].environment == "pytest"
