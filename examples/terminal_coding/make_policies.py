"""Write the three replay scripts of this folder from its task set (run from the project root):

    .venv/bin/python examples/terminal_coding/make_policies.py

- ``good.jsonl``: each task's reference fix, written with the python tool, then "done";
- ``bad.jsonl``: a plausible wrong fix (the decoy fix where the task has one, else only a look
  at the files), then "done";
- ``tamper.jsonl``: no fix, but a ``conftest.py`` that reports every test as passed, the
  visible tests deleted and a fake ``pytest`` package planted, then "done".

``veriloop eval --model replay:examples/terminal_coding/good.jsonl --tools python,shell,submit
--max-turns 4`` must pass every task; the other two must pass none.
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).parent
FORCE_PASS = (
    "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
    "    outcome = yield\n    outcome.get_result().outcome = 'passed'\n"
)


def write_files(files: dict[str, str]) -> str:
    """A python tool call that writes ``files`` into the workspace."""
    return f"<run_python>\nimport pathlib\nfor path, text in {files!r}.items():\n    target = pathlib.Path(path)\n    target.parent.mkdir(parents=True, exist_ok=True)\n    target.write_text(text)\n</run_python>"


def policies(tasks: list[dict]) -> dict[str, list[dict]]:
    scripts: dict[str, list[dict]] = {"good": [], "bad": [], "tamper": []}
    for task in tasks:
        prompt = task["prompt"]
        scripts["good"].append({"prompt": prompt, "turns": [write_files(task["gold"]["workspace"]), "done"]})
        decoy = task["metadata"].get("decoy_fix")
        wrong = write_files(decoy) if decoy else "<run_shell>ls -R</run_shell>"
        scripts["bad"].append({"prompt": prompt, "turns": [wrong, "done"]})
        planted = {"conftest.py": FORCE_PASS, "pytest/__init__.py": "", "pytest/__main__.py": "raise SystemExit(0)\n"}
        scripts["tamper"].append(
            {"prompt": prompt, "turns": [write_files(planted), "<run_shell>rm -rf tests</run_shell>", "done"]}
        )
    return scripts


def main() -> None:
    tasks = [json.loads(line) for line in (HERE / "tasks.jsonl").read_text(encoding="utf-8").splitlines()]
    for name, rows in policies(tasks).items():
        (HERE / f"{name}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


if __name__ == "__main__":
    main()
