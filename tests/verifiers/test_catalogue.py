"""``veriloop verifiers`` lists every registered kind's fields, and the README's reference is its output."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).parents[2] / "README.md"
BLOCK = re.compile(r"<!-- verifiers:start -->\n(.*?)<!-- verifiers:end -->", re.S)


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


def test_the_readme_reference_is_the_commands_output():
    block = BLOCK.search(README.read_text(encoding="utf-8"))
    assert block, "README.md has no <!-- verifiers:start --> ... <!-- verifiers:end --> block"
    assert block.group(1) == _cli("--markdown").stdout, "regenerate it: veriloop verifiers --markdown"


def test_an_unknown_kind_is_a_user_error():
    done = _cli("no_such_kind")
    assert done.returncode == 2 and "known: " in done.stderr
