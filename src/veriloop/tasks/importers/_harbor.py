"""Importer ``harbor``: Harbor task folders (the format of Terminal-Bench 2) as workspace tasks.

A task folder holds ``task.toml`` (metadata, ``[verifier]``, ``[agent]``, ``[environment]``,
``[solution]``), ``instruction.md`` (the prompt), ``environment/Dockerfile`` (the container the
agent works in), ``tests/test.sh`` and the files it uses, and optionally ``solution/solve.sh``.
``veriloop tasks import harbor DIR`` takes one such folder or a folder of them (each
subfolder with a ``task.toml``, by name). Each becomes one task:

- ``prompt``: ``instruction.md`` as written; ``id``: the folder's name;
- ``environment``: the Dockerfile read by ``_dockerfile.py`` (a ``python`` image, pip packages,
  ``WORKDIR``, ``ENV``), built as ``harbor-<hash of all that>`` when it is not built yet. Its
  links make the container's paths real in every sandbox on it: ``WORKDIR`` (say ``/app``) is
  the workspace, ``/tests`` and ``/solution`` are ``.harbor/tests`` and ``.harbor/solution``
  of the workspace, and ``/logs`` is ``/tmp/harbor-logs``, so ``/logs/verifier/reward.txt``
  is written outside the workspace the agent leaves;
- ``workspace``: the files the Dockerfile copies into ``WORKDIR``;
- ``verifier``: ``reward_script`` with the ``tests/`` files as hidden files under
  ``.harbor/tests``, running ``bash /tests/test.sh`` and reading ``/logs/verifier``;
  ``[verifier] timeout_sec`` and ``env`` become its ``timeout_s`` and ``variables``,
  ``[environment] memory_mb`` (or ``memory = "4G"``) its ``memory_mb``;
- ``gold``: the files ``solution/solve.sh`` changes or adds, found by running it (with
  ``[solution] env``, within ``[agent] timeout_sec``) in the sandbox on the task's environment,
  so ``veriloop tasks validate`` runs the reference solution through the verifier;
- ``metadata``: the folder, ``task.toml``'s ``[metadata]`` and ``[task]`` tables, the agent's
  time limit (``agent_timeout_s``: the task record has no episode clock) and the interpreters.

Every folder is read before anything is built: every problem of every folder (a Dockerfile line
that cannot be reproduced, a missing file, a bad ``task.toml``) is reported at once, and nothing
is written. Runs have no network: what ``test.sh`` needs must be installed by the Dockerfile (or
given with ``--packages``).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, field_validator

from veriloop.core import RowErrors, Snapshot, Task, UserError, describe_validation_error, inline_form
from veriloop.core import snapshot_archive
from veriloop.tasks._sources import SourceOptions, register_importer
from veriloop.tasks.importers._dockerfile import Image, read_image

HIDDEN = ".harbor"
TESTS = f"{HIDDEN}/tests"
SOLUTION = f"{HIDDEN}/solution"
LINKS = {"/tests": f"/workspace/{TESTS}", "/solution": f"/workspace/{SOLUTION}", "/logs": "/tmp/harbor-logs"}
"""The links every Harbor environment makes, beside its WORKDIR's."""
COMMAND = ("bash", "/tests/test.sh")
REWARD_DIR = "/logs/verifier"
DEFAULT_TIMEOUT_S = 600.0  # Harbor's, for the verifier and the agent
DEFAULT_MEMORY_MB = 2048
_MEMORY = re.compile(r"(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?\Z", re.I)


class HarborOptions(SourceOptions):
    path: Path = Field(
        description="a Harbor task folder (task.toml, instruction.md, environment/, tests/) or a folder of them"
    )
    domain: str = Field(default="terminal-coding", min_length=1, description="domain of every task")
    packages: tuple[str, ...] = Field(
        default=(), description="packages every environment also gets, e.g. pytest (test.sh runs without network)"
    )

    @field_validator("packages", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        return tuple(value.replace(",", " ").split()) if isinstance(value, str) else value


@dataclass(frozen=True)
class EnvironmentSpec:
    """The environment a task folder's Dockerfile asks for."""

    python: str | None  # the sandbox interpreter to build it with (None: the sandbox's python3)
    packages: tuple[str, ...]
    links: dict[str, str]
    variables: dict[str, str]

    @property
    def name(self) -> str:
        spec = json.dumps([self.python, self.packages, self.links, self.variables], sort_keys=True)
        return "harbor-" + hashlib.sha256(spec.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class FolderSettings:
    """What ``task.toml`` sets that the task uses (Harbor's defaults where it is silent)."""

    verifier_timeout_s: float = DEFAULT_TIMEOUT_S
    agent_timeout_s: float = DEFAULT_TIMEOUT_S
    memory_mb: int = DEFAULT_MEMORY_MB
    verifier_env: dict[str, str] = field(default_factory=dict)
    solution_env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class HarborTask:
    """One task folder, read and checked (nothing run yet)."""

    folder: Path
    prompt: str
    workspace: dict[str, bytes]
    tests: dict[str, str]
    solution: dict[str, bytes]
    environment: EnvironmentSpec
    settings: FolderSettings
    metadata: dict[str, Any]


def task_folders(path: Path) -> list[Path]:
    """``path`` when it is a task folder, else its subfolders that hold a ``task.toml``."""
    if not path.is_dir():
        raise UserError(f"{path}: no such folder; give a Harbor task folder or a folder of them")
    if (path / "task.toml").is_file():
        return [path]
    found = sorted(p for p in path.iterdir() if p.is_dir() and (p / "task.toml").is_file())
    if not found:
        raise UserError(f"{path}: holds no Harbor task folder (a folder with a task.toml)")
    return found


def read_task_folder(folder: Path, extra_packages: tuple[str, ...]) -> tuple[HarborTask | None, list[str]]:
    """The task of ``folder`` and every problem found in it (the task is None when there are any)."""
    problems: list[str] = []
    config = _toml(folder / "task.toml", problems)
    prompt = _text(folder / "instruction.md", problems)
    if prompt is not None and not prompt.strip():
        problems.append(f"{folder / 'instruction.md'}: is empty; it is the task's prompt")
    image, workspace = _image(folder, config, problems)
    tests = _tree(folder / "tests", problems, text=True)
    if tests is not None and "test.sh" not in tests:
        problems.append(f"{folder / 'tests'}: has no test.sh, the script that writes the reward")
    solution = _tree(folder / "solution", problems, text=False) if (folder / "solution").exists() else {}
    if solution and "solve.sh" not in solution:
        problems.append(f"{folder / 'solution'}: has no solve.sh")
    settings = _settings(folder / "task.toml", config, problems)
    if problems or image is None or tests is None or prompt is None or solution is None or settings is None:
        return None, problems
    environment = EnvironmentSpec(
        python=_sandbox_python(image.python),
        packages=tuple(dict.fromkeys([*image.packages, *extra_packages])),
        links=_links(image.workdir),
        variables=image.variables,
    )
    metadata = {
        "source": "harbor",
        "folder": folder.name,
        "agent_timeout_s": settings.agent_timeout_s,
        "python": {"image": image.python, "sandbox": environment.python or "python3"},
        **{key: _plain(config[key]) for key in ("metadata", "task") if isinstance(config.get(key), dict)},
    }
    task = HarborTask(
        folder=folder,
        prompt=prompt,
        workspace=workspace,
        tests=tests,
        solution=solution,
        environment=environment,
        settings=settings,
        metadata=metadata,
    )
    return task, []


def _toml(path: Path, problems: list[str]) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(f"{path}: cannot be read ({exc})")
    except tomllib.TOMLDecodeError as exc:
        problems.append(f"{path}: not TOML: {exc}")
    return {}


def _text(path: Path, problems: list[str]) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        problems.append(f"{path}: missing")
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(f"{path}: cannot be read as UTF-8 text ({exc})")
    return None


def _image(folder: Path, config: dict[str, Any], problems: list[str]) -> tuple[Image | None, dict[str, bytes]]:
    """The Dockerfile's image and the workspace it copies into WORKDIR."""
    environment = config.get("environment", {})
    dockerfile = folder / "environment" / "Dockerfile"
    if isinstance(environment, dict) and environment.get("docker_image"):
        problems.append(
            f"{folder / 'task.toml'}: [environment] docker_image {environment['docker_image']!r} is a prebuilt "
            "image, which cannot be rebuilt as an environment; give environment/Dockerfile instead"
        )
        return None, {}
    if not dockerfile.is_file():
        found = "docker-compose.yaml" if (folder / "environment" / "docker-compose.yaml").exists() else None
        why = f"holds {found}, which is not supported" if found else "is missing"
        problems.append(f"{dockerfile}: {why}; an environment is read from a Dockerfile")
        return None, {}
    try:
        image, refused = read_image(dockerfile)
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(f"{dockerfile}: cannot be read as UTF-8 text ({exc})")
        return None, {}
    problems += refused
    workspace = image.workspace()[0]
    if owned := [p for p in workspace if p == HIDDEN or p.startswith(HIDDEN + "/")]:
        problems.append(f"{dockerfile}: copies {owned[0]}; {HIDDEN}/ of the workspace holds the tests and solution")
    if not refused:
        _check_workdir(dockerfile, image, problems)
    return (None if refused else image), workspace


def _check_workdir(dockerfile: Path, image: Image, problems: list[str]) -> None:
    from veriloop.sandbox import check_links

    if image.workdir == "/" and image.files:
        problems.append(
            f"{dockerfile}: sets no WORKDIR; the workspace is the working directory: give one (WORKDIR /app)"
        )
        return
    try:
        check_links(_links(image.workdir))
    except UserError as exc:
        problems.append(f"{dockerfile}: WORKDIR {image.workdir} cannot be the workspace: {exc}")


def _links(workdir: str) -> dict[str, str]:
    own = {} if workdir in ("/", "/workspace") else {workdir: "/workspace"}
    return {**LINKS, **own}


def _tree(root: Path, problems: list[str], *, text: bool) -> dict[str, Any] | None:
    """Every regular file under ``root`` by its path below it (text, or bytes); None on a problem."""
    if not root.is_dir():
        problems.append(f"{root}: missing")
        return None
    count = len(problems)
    files: dict[str, Any] = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        if path.is_symlink() or not (path.is_file() or path.is_dir()):
            problems.append(f"{path}: is a link or a special file; a task folder may hold files only")
        elif path.is_file():
            content = path.read_bytes()
            try:
                files[relative] = content.decode("utf-8") if text else content
            except UnicodeDecodeError:
                problems.append(f"{path}: is not UTF-8 text; the hidden test files are text")
    return files if len(problems) == count else None


def _unsupported_shapes(path: Path, config: dict[str, Any], verifier: dict[str, Any], problems: list[str]) -> None:
    """Task shapes whose tests would not run here as Harbor runs them: a verifier in a container of
    its own (``environment_mode = "separate"``, or a ``[verifier.environment]``), which sees the
    agent's files only through collected artifacts; state collected from compose services
    (``[[verifier.collect]]``); and tasks of several steps (``[[steps]]``)."""
    mode = verifier.get("environment_mode")
    if mode == "separate" or (mode is None and "environment" in verifier):
        problems.append(
            f"{path}: [verifier] runs the tests in a container of their own (environment_mode separate); "
            "only a verifier that shares the task's environment (shared, the default) can be imported"
        )
    elif mode not in (None, "shared"):
        problems.append(f"{path}: [verifier] environment_mode {mode!r} is not shared or separate")
    if verifier.get("collect"):
        problems.append(f"{path}: [[verifier.collect]] reads compose services, which an import cannot run")
    if config.get("steps"):
        problems.append(f"{path}: [[steps]] makes a task of several steps; only single-step tasks can be imported")


def _settings(path: Path, config: dict[str, Any], problems: list[str]) -> FolderSettings | None:
    """The settings of ``task.toml`` (None, with the problems added, when any is bad)."""
    count = len(problems)
    tables = {name: config.get(name, {}) for name in ("verifier", "agent", "environment", "solution")}
    for name, table in tables.items():
        if not isinstance(table, dict):
            problems.append(f"{path}: [{name}] must be a table")
    if len(problems) > count:
        return None
    _unsupported_shapes(path, config, tables["verifier"], problems)
    settings = FolderSettings(
        verifier_timeout_s=_seconds(path, "verifier", tables["verifier"], problems),
        agent_timeout_s=_seconds(path, "agent", tables["agent"], problems),
        memory_mb=_memory_mb(path, tables["environment"], problems),
        verifier_env=_variables(path, "verifier", tables["verifier"], problems),
        solution_env=_variables(path, "solution", tables["solution"], problems),
    )
    return None if len(problems) > count else settings


def _seconds(path: Path, table: str, values: dict[str, Any], problems: list[str]) -> float:
    value = values.get("timeout_sec", DEFAULT_TIMEOUT_S)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        problems.append(f"{path}: [{table}] timeout_sec must be a positive number of seconds, not {value!r}")
        return DEFAULT_TIMEOUT_S
    return min(float(value), 3600.0)


def _memory_mb(path: Path, values: dict[str, Any], problems: list[str]) -> int:
    if "memory_mb" in values:
        value = values["memory_mb"]
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return max(64, value)
        problems.append(f"{path}: [environment] memory_mb must be a positive whole number, not {value!r}")
        return DEFAULT_MEMORY_MB
    text = values.get("memory")
    if text is None:
        return DEFAULT_MEMORY_MB
    match = _MEMORY.match(str(text).strip())
    if not match:
        problems.append(f"{path}: [environment] memory {text!r} is not a size such as '4G' or '512M'")
        return DEFAULT_MEMORY_MB
    scale = {"": 1 / (1 << 20), "K": 1 / 1024, "M": 1, "G": 1024, "T": 1 << 20}[match.group(2).upper()]
    return max(64, int(float(match.group(1)) * scale))


def _variables(path: Path, table: str, values: dict[str, Any], problems: list[str]) -> dict[str, str]:
    env = values.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(v, str | int | float) for v in env.values()):
        problems.append(f"{path}: [{table}] env must be a table of text values")
        return {}
    if templated := sorted(k for k, v in env.items() if "${" in str(v)):
        problems.append(
            f"{path}: [{table}] env {templated[0]} takes a value from the host's environment, which a sandbox never "
            "sees; write the value out"
        )
    if bad := sorted(k for k in env if not str(k).isidentifier()):
        problems.append(f"{path}: [{table}] env {bad[0]!r} is not a variable name")
    return {str(k): str(v) for k, v in env.items()}


def _sandbox_python(version: str | None) -> str | None:
    """This machine's interpreter of ``version`` (``X.Y``) for the sandbox, or None (the sandbox's
    python3) when it has none or no version is asked for."""
    if version is None:
        return None
    for folder in ("/usr/bin", "/usr/local/bin"):
        if os.access(f"{folder}/python{version}", os.X_OK):
            return f"{folder}/python{version}"
    return None


def _plain(value: Any) -> Any:
    """A TOML value as JSON data (dates and times as text)."""
    return json.loads(json.dumps(value, default=str))


def ensure_environment(spec: EnvironmentSpec, log=lambda line: None) -> str:
    """Build the environment ``spec`` names unless one with its packages, links and variables exists."""
    from veriloop.sandbox import build_environment, load_environment

    try:
        built = load_environment(spec.name)
        same = (built.packages, built.links, built.variables) == (spec.packages, spec.links, spec.variables)
    except UserError:
        same = False
    if not same:
        build_environment(
            spec.name, list(spec.packages), python=spec.python, links=spec.links, variables=spec.variables, log=log
        )
    return spec.name


def gold_of(task: HarborTask, sandbox: Any) -> tuple[dict[str, Any] | None, str | None]:
    """``({"workspace": files solve.sh changed or added}, None)``, ``(None, None)`` without a
    solution, or ``(None, problem)`` when it fails or removes files."""
    if not task.solution:
        return None, None
    from veriloop.sandbox import Limits

    files = {**task.workspace, **{f"{SOLUTION}/{p}": c for p, c in task.solution.items()}}
    variables = [f"{name}={value}" for name, value in task.settings.solution_env.items()]
    limits = Limits(timeout_s=task.settings.agent_timeout_s, memory_mb=task.settings.memory_mb, max_processes=64)
    result = sandbox.run(
        ["env", *variables, "bash", "/solution/solve.sh"],
        snapshot=Snapshot(archive=snapshot_archive(files)),
        capture=True,
        limits=limits,
    )
    where = task.folder / "solution" / "solve.sh"
    if result.status != "ok" or result.snapshot is None:
        ending = f"exit code {result.exit_code}" if result.status == "error" else result.status
        tail = (result.stderr or result.stdout).strip()[-400:]
        return None, f"{where}: the reference solution failed ({ending}){': ' + tail if tail else ''}"
    after = {p: c for p, c in result.snapshot.files().items() if not (p == HIDDEN or p.startswith(HIDDEN + "/"))}
    if removed := sorted(set(task.workspace) - set(after)):
        return None, f"{where}: removes {', '.join(removed[:3])}; a gold workspace can only add or change files"
    changed = {p: c for p, c in after.items() if task.workspace.get(p) != c}
    return {"workspace": inline_form(changed)}, None


def task_record(task: HarborTask, domain: str, gold: dict[str, Any] | None) -> Task:
    """The task ``task`` becomes (UserError naming its folder when the record is refused)."""
    verifier = {
        "kind": "reward_script",
        "files": {f"{TESTS}/{path}": text for path, text in task.tests.items()},
        "command": list(COMMAND),
        "reward_dir": REWARD_DIR,
        "variables": task.settings.verifier_env,
        "timeout_s": task.settings.verifier_timeout_s,
        "memory_mb": task.settings.memory_mb,
    }
    try:
        return Task(
            id=task.folder.name,
            domain=domain,
            prompt=task.prompt,
            verifier=verifier,
            gold=gold,
            metadata=task.metadata,
            environment=task.environment.name,
            workspace=inline_form(task.workspace),
        )
    except ValidationError as exc:
        raise UserError(f"{task.folder}: {describe_validation_error(exc)}") from None


@register_importer("harbor", HarborOptions, argument="path")
def import_harbor(options: HarborOptions) -> list[Task]:
    """Harbor task folders (Terminal-Bench 2): instruction, Dockerfile, tests/test.sh, solution."""
    from veriloop.sandbox import Sandbox

    folders = task_folders(options.path)
    read = [read_task_folder(folder, options.packages) for folder in folders]
    problems = [problem for _, found in read for problem in found]
    refused = sum(1 for task, _ in read if task is None)
    if problems:
        raise RowErrors([*problems, f"{refused} of {len(folders)} Harbor task folders refused; nothing written"])
    tasks = [task for task, _ in read if task is not None]
    golds: dict[Path, dict[str, Any] | None] = {}
    for name in sorted({task.environment.name for task in tasks}):
        on_it = [task for task in tasks if task.environment.name == name]
        ensure_environment(on_it[0].environment)
        with Sandbox(environment=name) as sandbox:
            for task in on_it:
                golds[task.folder], problem = gold_of(task, sandbox)
                problems += [problem] if problem else []
    if problems:
        raise RowErrors([*problems, f"{len(problems)} of {len(folders)} reference solutions failed; nothing written"])
    return [task_record(task, options.domain, golds[task.folder]) for task in tasks]
