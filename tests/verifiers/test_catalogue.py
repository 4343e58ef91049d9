"""``veriloop verifiers`` lists every registered kind's fields, and the docs' reference holds its output."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

DOCS_HOOK = Path(__file__).parents[2] / "docs" / "hooks" / "reference.py"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "VERILOOP_PLUGINS"}  # the built-in kinds only
    command = [sys.executable, "-m", "veriloop.cli._entry", "verifiers", *args]
    return subprocess.run(command, capture_output=True, text=True, env=environment, timeout=120)


def test_every_kind_and_field_is_listed_with_its_default():
    names = "from veriloop.verifiers import VERIFIERS; print(' '.join(VERIFIERS.names()))"
    environment = {k: v for k, v in os.environ.items() if k != "VERILOOP_PLUGINS"}
    registered = subprocess.run([sys.executable, "-c", names], capture_output=True, text=True, env=environment).stdout
    rows = [json.loads(line) for line in _cli("--json").stdout.splitlines()]
    assert {r["kind"] for r in rows} == set(registered.split()) and "python_tests" in registered.split()
    by_key = {(r["kind"], r["field"]): r for r in rows}
    assert by_key[("math", "timeout_s")]["default"] == "5.0" and by_key[("math", "timeout_s")]["type"] == "float"
    assert by_key[("python_tests", "entry_point")]["default"] == "required"
    assert all(r["description"] for r in rows), [r for r in rows if not r["description"]]


def test_the_docs_reference_holds_the_commands_output():
    spec = importlib.util.spec_from_file_location("docs_reference_hook", DOCS_HOOK)
    assert spec is not None and spec.loader is not None
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    page = hook.verifiers_page()  # reference/verifiers.md, generated when the site is built
    rows = _cli("--markdown").stdout.splitlines()[2:]
    assert rows and [row for row in rows if row not in page] == []


def test_an_unknown_kind_is_a_user_error():
    done = _cli("no_such_kind")
    assert done.returncode == 2 and "known: " in done.stderr
