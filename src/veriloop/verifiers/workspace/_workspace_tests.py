"""Verifier kind ``workspace_tests``: hidden tests run on an episode's final workspace.

After the episode, the host builds the workspace the verdict is reached in: the final workspace
(the response's ``workspace``; the task's initial one when the response has none) without the
files that shape a test run rather than the code under test, then the hidden test files written
over it (the agent never saw them: they are neither in its workspace nor in its prompt). Removed
from the final workspace:

- bytecode (``__pycache__`` folders, ``.pyc``/``.pyo`` files: stale bytecode would run in place
  of the sources), ``.pth`` files and ``.pytest_cache``;
- ``conftest.py``, ``sitecustomize.py`` and ``usercustomize.py`` files, unless the task's initial
  workspace holds the same file at the same path;
- anything at a hidden file's path, or where a folder on the way to one must be.

The tests then run in the sandbox on the task's environment; ``sandboxed/_test_runner.py`` says
how the run is isolated from planted test machinery. Under pytest the workspace's code runs in a
process of its own (``sandboxed/_workspace_candidate.py``), the hidden tests in another that holds
proxies of it (``sandboxed/_pytest_process.py``, ``_workspace_proxy.py``, ``_workspace_imports.py``),
and each test's outcome reaches the runner over a pipe only the test process holds: the code under
test cannot write what decides the verdict. The test process holds the hidden Python files' text
and leaves placeholders on disk before the code starts, so the code cannot read the tests either;
the tests' functions reach the code as their code (``code/sandboxed/_shipped_callables.py``), and
why a test's value could not cross is added to the verdict's detail. Another ``command`` runs with the code in its process
and writes a JUnit XML report, which the verdict's detail says comes from that process
(``REPORT_FROM_THE_CODE``). The host reads the outcome of each case from the runner's answer, never
from the output. A test function of the hidden files that the outcomes do not show (deleted by a
skip of its module, a collection error, a process that ended early) counts as failed, and so does
a skipped case. Reward: the fraction of hidden test cases passed, or 1/0 with ``all_or_nothing``.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path, PurePosixPath

from pydantic import Field, field_validator, model_validator

from veriloop.core import Snapshot, Task, WorkspaceError, snapshot_archive, workspace_path
from veriloop.sandbox import joined_source
from veriloop.verifiers.code.sandboxed import _shipped_callables, _wire
from veriloop.verifiers._registry import GraderError, Verdict, VerifierConfig, register_verifier

_SANDBOXED = Path(__file__).parent / "sandboxed"
RUNNER_SOURCE = (_SANDBOXED / "_test_runner.py").read_text(encoding="utf-8")
_ON_ITS_FOLDER = "import os as _os, sys as _sys\n_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))\n"
PYTEST_SCRIPTS = {
    "_wire.py": Path(_wire.__file__).read_text(encoding="utf-8"),
    "_shipped_callables.py": "from _wire import NotPlainData, decode_value, encode_value\n"
    + joined_source(Path(_shipped_callables.__file__).parent, ("_shipped_callables",)),
    "pytest_process.py": _ON_ITS_FOLDER
    + joined_source(_SANDBOXED, ("_crossing", "_workspace_proxy", "_workspace_imports", "_pytest_process")),
    "candidate.py": _ON_ITS_FOLDER + joined_source(_SANDBOXED, ("_crossing", "_workspace_candidate")),
}
"""The scripts of a pytest run's test and candidate processes, written to the run's private folder."""
PYTEST = ["python", "-m", "pytest", "-q"]
_BYTECODE_DIRS = frozenset({"__pycache__", ".pytest_cache"})
_BYTECODE_SUFFIXES = (".pyc", ".pyo", ".pth")
_HOOK_FILES = frozenset({"conftest.py", "sitecustomize.py", "usercustomize.py"})
_OUTPUT_CHARS = 4000
REPORT_FROM_THE_CODE = "the report comes from the process that runs the workspace's code (command is not pytest)"


class WorkspaceTestsConfig(VerifierConfig):
    files: dict[str, str] = Field(description="the hidden test files, {path: text}, written over the final workspace")
    command: list[str] = Field(
        default_factory=lambda: list(PYTEST),
        description="what runs them: pytest (run hardened), or a command writing JUnit XML to $VERILOOP_REPORT",
    )
    all_or_nothing: bool = Field(default=False, description="reward 1 only when every hidden test passes, else 0")
    expected_tests: int | None = Field(
        default=None, ge=1, description="fewest test cases the report must hold (default: the test functions in files)"
    )
    timeout_s: float = Field(default=60.0, gt=0, le=3600, description="wall-clock limit of the test run")
    memory_mb: int = Field(default=1024, ge=64, description="memory limit of each process of the test run")

    @field_validator("files")
    @classmethod
    def _paths_inside(cls, files: dict[str, str]) -> dict[str, str]:
        return hidden_files(files, "needs at least one hidden test file")

    @field_validator("command")
    @classmethod
    def _command_given(cls, command: list[str]) -> list[str]:
        if not command or not all(isinstance(part, str) and part for part in command):
            raise ValueError("needs a command: a non-empty list of arguments")
        return command

    @model_validator(mode="after")
    def _tests_to_count(self) -> WorkspaceTestsConfig:
        if self.expected_tests is None and not any(test_functions(self.files).values()):
            raise ValueError("files hold no test function (def test_...); give expected_tests for another runner")
        return self

    @property
    def runs_pytest(self) -> bool:
        return (
            len(self.command) >= 3
            and self.command[0] in ("python", "python3")
            and self.command[1:3] == ["-m", "pytest"]
        )


def hidden_files(files: dict[str, str], when_empty: str) -> dict[str, str]:
    """A kind's hidden ``files`` with their names as workspace paths; ValueError ``when_empty``
    when there are none, or naming a path that leaves the workspace."""
    if not files:
        raise ValueError(when_empty)
    try:
        return {workspace_path(name): text for name, text in files.items()}
    except WorkspaceError as exc:
        raise ValueError(str(exc)) from None


def test_files(files: dict[str, str]) -> list[str]:
    """The hidden files pytest collects by default: ``test_*.py`` and ``*_test.py``."""
    return sorted(p for p in files if (n := PurePosixPath(p).name).endswith(".py") and _is_test_module(n))


def _is_test_module(name: str) -> bool:
    return name.startswith("test_") or name.endswith("_test.py")


def test_functions(files: dict[str, str]) -> dict[str, list[str]]:
    """``{file: [test names]}``: module-level ``test*`` functions and ``test*`` methods of
    ``Test*`` classes, as pytest collects them by default (a file that does not parse has none:
    its collection error fails the run)."""
    found: dict[str, list[str]] = {}
    for path in test_files(files):
        names: list[str] = []
        try:
            tree = ast.parse(files[path])
        except SyntaxError:
            found[path] = []
            continue
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test"):
                names.append(node.name)
            elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name.startswith("test"):
                        names.append(f"{node.name}.{item.name}")
        found[path] = names
    return found


def verdict_workspace(
    initial: dict[str, bytes], final: dict[str, bytes], hidden: dict[str, str]
) -> tuple[dict[str, bytes], list[str]]:
    """The files the tests run on (see the module's docstring) and the paths removed."""
    kept: dict[str, bytes] = {}
    removed: list[str] = []
    blocked = set(hidden)
    for path in hidden:
        blocked.update(str(p) for p in PurePosixPath(path).parents if str(p) != ".")
    for path, content in final.items():
        parts = path.split("/")
        planted = parts[-1] in _HOOK_FILES and initial.get(path) != content
        bytecode = any(part in _BYTECODE_DIRS for part in parts[:-1]) or parts[-1].endswith(_BYTECODE_SUFFIXES)
        in_the_way = path in blocked or any(path.startswith(h + "/") for h in hidden)
        if planted or bytecode or in_the_way:
            removed.append(path)
        else:
            kept[path] = content
    kept.update({path: text.encode() for path, text in hidden.items()})
    return kept, sorted(removed)


def trusted_files(files: dict[str, bytes], hidden: dict[str, str]) -> list[str]:
    """The Python files of the verdict workspace that pytest's test process runs itself: the
    hidden files and the conftests the task shipped (the others were removed)."""
    return sorted(p for p in files if p.endswith(".py") and (p in hidden or PurePosixPath(p).name == "conftest.py"))


def runner_program(config: WorkspaceTestsConfig, trusted: list[str] = ()) -> str:
    settings = {
        "command": config.command,
        "test_files": test_files(config.files),
        "trusted": list(trusted),
        "hidden": [path for path in trusted if path in config.files],
        "scripts": PYTEST_SCRIPTS if config.runs_pytest else {},
        "timeout_s": config.timeout_s,
        "output_chars": _OUTPUT_CHARS,
    }
    return RUNNER_SOURCE.replace("SETTINGS = {}", f"SETTINGS = json.loads({json.dumps(settings)!r})", 1)


def final_workspace(task: Task, response: str) -> dict[str, bytes]:
    """The response's final workspace, or the task's initial one when it carries none."""
    workspace = getattr(response, "workspace", None)
    return dict(workspace) if workspace is not None else task.workspace_files()


def run_in_environment(task: Task, program: str | list[str], files: dict[str, bytes], timeout_s: float, memory_mb: int):
    """Run ``program`` on a workspace of ``files`` in the task's environment (retried once if
    the sandbox itself was lost): Python source on the environment's interpreter, or a command
    line (argv, its first part looked up on the sandbox's PATH, which holds no workspace folder)."""
    from veriloop.sandbox import Limits
    from veriloop.verifiers.code._code_sandbox import environment_sandbox, sandbox_lost

    sandbox = environment_sandbox(task.environment)
    size_mb = sum(map(len, files.values())) >> 20
    limits = Limits(timeout_s=timeout_s, memory_mb=memory_mb, max_file_mb=max(64, size_mb + 1))
    snapshot = Snapshot(archive=snapshot_archive(files))
    run = sandbox.run_python if isinstance(program, str) else sandbox.run
    result = run(program, snapshot=snapshot, limits=limits)
    if sandbox_lost(result):
        result = run(program, snapshot=snapshot, limits=limits)
    return result


@register_verifier("workspace_tests", WorkspaceTestsConfig)
def check_workspace_tests(config: WorkspaceTestsConfig, task: Task, response: str) -> Verdict:
    """Run the hidden tests on the final workspace; reward the fraction passed (see module docs)."""
    if config.runs_pytest and task.environment is None:
        raise GraderError("pytest runs on an environment: give the task an 'environment' with pytest installed")
    files, removed = verdict_workspace(task.workspace_files(), final_workspace(task, response), config.files)
    program = runner_program(config, trusted_files(files, config.files))
    result = run_in_environment(task, program, files, config.timeout_s + 15, config.memory_mb)
    note = f" (left out of the run: {', '.join(removed[:5])}{' ...' if len(removed) > 5 else ''})" if removed else ""
    if not result.ok:
        detail = f"the test run ended: {result.status} {result.detail}".rstrip() + note
        return Verdict(
            0.0, False, detail=detail, feedback="The tests could not finish.", environment=result.environment
        )
    try:
        answer = json.loads(result.stdout.strip().splitlines()[-1])
        cases = [tuple(case) for case in answer["cases"]]
    except (ValueError, KeyError, IndexError, TypeError):
        raise GraderError(f"the test runner answered {result.stdout[-200:]!r}") from None
    if answer["problem"]:
        tail = answer["output"].strip()[-600:]
        detail = f"{answer['problem']}{note}" + (f"; output: {tail}" if tail else "")
        feedback = f"The hidden tests failed: {answer['problem']}."
        return Verdict(0.0, False, detail=detail, feedback=feedback, environment=result.environment)
    refused = [str(why) for why in answer.get("refused", [])[:3]]
    return _tally(config, cases, note + "".join(f"; {why[:300]}" for why in refused), result.environment)


def _tally(config: WorkspaceTestsConfig, cases: list[tuple], note: str, environment: str | None) -> Verdict:
    hidden = set(test_files(config.files))
    ours = [(file, cls, name, outcome) for file, cls, name, outcome in cases if file in hidden]
    if not config.runs_pytest:
        ours = cases  # a command's report names files as it likes: every case counts
    seen = {(file, _base_name(cls, name)) for file, cls, name, _ in ours}
    missing = [f"{file}::{name}" for file, names in test_functions(config.files).items() for name in names]
    missing = [m for m in missing if tuple(m.split("::", 1)) not in seen]
    total = max(len(ours) + len(missing), config.expected_tests or 0)
    passed = sum(outcome == "passed" for *_, outcome in ours)
    failing = [f"{file}::{_shown_name(cls, name)}" for file, cls, name, outcome in ours if outcome != "passed"]
    failing += missing
    reward = passed / total if total else 0.0
    complete = total > 0 and passed == total
    if config.all_or_nothing:
        reward = 1.0 if complete else 0.0
    detail = f"{passed}/{total} hidden tests passed"
    if failing:
        detail += f"; not passed: {', '.join(failing[:8])}{' ...' if len(failing) > 8 else ''}"
    if not config.runs_pytest:
        detail += f"; {REPORT_FROM_THE_CODE}"
    feedback = "" if complete else f"{total - passed} of {total} hidden tests did not pass."
    return Verdict(reward, complete, detail=detail + note, feedback=feedback, environment=environment)


def _shown_name(classname: str, name: str) -> str:
    """A case's name with its test class, if any (``TestMore.test_negative``, ``test_double[4]``)."""
    owner = classname.rsplit(".", 1)[-1]
    return f"{owner}.{name}" if owner.startswith("Test") else name


def _base_name(classname: str, name: str) -> str:
    """A case's test function as ``test_functions`` names it (parameters dropped)."""
    return _shown_name(classname, name.split("[", 1)[0])
