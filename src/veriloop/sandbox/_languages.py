"""Languages a sandbox can run source code in, by name: how to place, build and start it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pydantic import ConfigDict, Field

from veriloop.core import ExecResult, Record, Registry, Snapshot
from veriloop.sandbox._limits import Limits
from veriloop.sandbox._sandbox import Files, Sandbox

_COMPILER_MEMORY_MB = 1024  # cc1plus needs far more address space than the programs it builds


@dataclass(frozen=True)
class Language:
    """``source`` is the file the code goes in; ``build`` (if any) runs first, in a run of its own."""

    source: str
    start: tuple[str, ...] = ()  # empty: Python on the warm interpreter
    build: tuple[str, ...] = ()


LANGUAGES: Registry[Language] = Registry("language")
LANGUAGES.add("python", Language(source="main.py"))
LANGUAGES.add("bash", Language(source="main.sh", start=("bash", "main.sh")))
LANGUAGES.add("c", Language(source="main.c", start=("./main",), build=("gcc", "-O2", "-o", "main", "main.c", "-lm")))
LANGUAGES.add(
    "cpp", Language(source="main.cpp", start=("./main",), build=("g++", "-O2", "-std=c++17", "-o", "main", "main.cpp"))
)


class CodeRun(Record):
    """The build step (None when the language has none), the run (None if the build failed),
    and the fetched workspace files."""

    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")

    build: ExecResult | None = None
    run: ExecResult | None = None
    files: dict[str, bytes] = Field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.run is not None and self.run.ok


@dataclass(frozen=True)
class Build:
    """A program's build: its run (None for a language that builds nothing) and the workspace it
    left, the built program with its source (None when the build failed or there is none)."""

    result: ExecResult | None = None
    snapshot: Snapshot | None = None


def build_code(
    sandbox: Sandbox,
    language: str,
    code: str,
    *,
    files: Files | None = None,
    limits: Limits | None = None,
    build_timeout_s: float = 10.0,
) -> Build:
    """Build ``code`` in ``language`` in a run of its own; every run of the program can then
    start from ``snapshot``, the pristine build, rather than from what an earlier run left."""
    spec = LANGUAGES.get(language)
    if not spec.build:
        return Build()
    limits = limits or sandbox.limits
    build_limits = limits.model_copy(
        update={"timeout_s": build_timeout_s, "cpu_s": None, "memory_mb": max(limits.memory_mb, _COMPILER_MEMORY_MB)}
    )
    placed: dict[str, str | bytes] = {**(files or {}), spec.source: code}
    result = sandbox.run(spec.build, files=placed, limits=build_limits, capture=True)
    snapshot = result.snapshot if result.ok else None
    return Build(result=result.model_copy(update={"snapshot": None}), snapshot=snapshot)


def run_code(
    sandbox: Sandbox,
    language: str,
    code: str,
    *,
    stdin: str | bytes | None = None,
    files: Files | None = None,
    limits: Limits | None = None,
    build_timeout_s: float = 10.0,
    fetch: Sequence[str] = (),
) -> CodeRun:
    """Run ``code`` as a program in ``language`` (a name in LANGUAGES); ``fetch`` names
    workspace files to return after the run."""
    spec = LANGUAGES.get(language)
    limits = limits or sandbox.limits
    placed: dict[str, str | bytes] = {**(files or {}), spec.source: code}
    built = build_code(sandbox, language, code, files=files, limits=limits, build_timeout_s=build_timeout_s)
    build, snapshot = built.result, built.snapshot
    if spec.build:
        if snapshot is None:
            return CodeRun(build=build)
        placed = {}
    capture = bool(fetch)
    if spec.start:
        run = sandbox.run(spec.start, files=placed, stdin=stdin, limits=limits, snapshot=snapshot, capture=capture)
    else:
        run = sandbox.run_python(code, files=placed, stdin=stdin, limits=limits, capture=capture)
    fetched = _pick(run.snapshot.files() if run.snapshot else {}, fetch)
    return CodeRun(build=build, run=run.model_copy(update={"snapshot": None}), files=fetched)


def _pick(files: Mapping[str, bytes], names: Sequence[str]) -> dict[str, bytes]:
    return {name: files[name] for name in names if name in files}
