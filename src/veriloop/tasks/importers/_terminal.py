"""Importer ``terminal-jsonl``: repository tasks written by hand, one JSON object per line.

Each line gives a repository (``files``), the prompt, and the hidden tests the verifier adds
before it runs ``command`` in the sandbox ``environment``::

    {"id": "fix-1", "prompt": "...", "files": {"pkg/a.py": "..."}, "hidden_tests": {"tests/test_h.py": "..."}}

Optional: ``command`` (default ``python -m pytest -q``), ``environment`` (default ``pytest``),
``gold_files`` (the reference fix: full text of each file it changes or adds),
``all_or_nothing`` (passed to the verifier only when given) and ``domain`` (default
``terminal-coding``). Every path is relative, without ``..``, written in normal form; a hidden
test may not share a path with a workspace file, and the gold may not write one. Every bad line
is reported as ``FILE: line N: ...``; nothing is written when any is bad.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    ValidationError,
    field_validator,
)

from veriloop.core import Task, UserError, describe_validation_error
from veriloop.tasks.importers._rows import tasks_from_rows
from veriloop.tasks._sources import SourceOptions, register_importer

COMMAND = ("python", "-m", "pytest", "-q")


def _relative_path(path: str) -> str:
    """``path`` when it is a relative path in normal form inside the repository; else ValueError."""
    pure = PurePosixPath(path)
    if not path or "\x00" in path or "\\" in path or pure.is_absolute() or ".." in pure.parts:
        raise ValueError(f"path {path!r} must be relative, inside the repository, without '..'")
    if str(pure) != path:
        raise ValueError(f"path {path!r} is not in normal form: write it as {str(pure)!r}")
    return path


def _overlap(path: str, others: dict[str, str]) -> str | None:
    """A path of ``others`` that is ``path``, lies inside it or holds it, if any."""
    return next((o for o in others if o == path or o.startswith(path + "/") or path.startswith(o + "/")), None)


class TerminalRow(BaseModel):
    """One line of a ``terminal-jsonl`` file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    prompt: str = Field(min_length=1)
    files: dict[str, str] = Field(min_length=1)
    hidden_tests: dict[str, str] = Field(min_length=1)
    command: list[str] = Field(default_factory=lambda: list(COMMAND), min_length=1)
    environment: str = "pytest"
    gold_files: dict[str, str] | None = None
    all_or_nothing: StrictBool | None = None
    domain: str = Field(default="terminal-coding", min_length=1)

    @field_validator("id", mode="before")
    @classmethod
    def _id_text(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        if not isinstance(value, str) or not value:
            raise ValueError("must be a non-empty string or an integer")
        return value

    @field_validator("files", "hidden_tests", "gold_files")
    @classmethod
    def _paths(cls, files: dict[str, str] | None) -> dict[str, str] | None:
        for path in files or {}:
            _relative_path(path)
        return files

    @field_validator("command")
    @classmethod
    def _command(cls, command: list[str]) -> list[str]:
        if not all(command):
            raise ValueError("every argument must be a non-empty string")
        return command


def _check_collisions(row: TerminalRow) -> None:
    """ValueError when a hidden test would overwrite (or sit under) a workspace or gold file."""
    for path in row.hidden_tests:
        for what, files in (("workspace", row.files), ("gold", row.gold_files or {})):
            if (other := _overlap(path, files)) is not None:
                raise ValueError(f"hidden test {path!r} collides with the {what} file {other!r}")


def terminal_task_fields(row: dict[str, Any], source: str, line: int) -> dict[str, Any]:
    """The Task fields of one row; ValueError saying what is wrong with it otherwise."""
    try:
        parsed = TerminalRow.model_validate(row)
    except ValidationError as exc:
        raise ValueError(describe_validation_error(exc)) from None
    _check_collisions(parsed)
    verifier: dict[str, Any] = {
        "kind": "workspace_tests",
        "files": parsed.hidden_tests,
        "command": parsed.command,
    }
    if parsed.all_or_nothing is not None:
        verifier["all_or_nothing"] = parsed.all_or_nothing
    return {
        "id": parsed.id,
        "domain": parsed.domain,
        "prompt": parsed.prompt,
        "environment": parsed.environment,
        "workspace": parsed.files,
        "verifier": verifier,
        "gold": None if parsed.gold_files is None else {"workspace": parsed.gold_files},
        "metadata": {"source": source, "line": line},
    }


class TerminalJsonlOptions(SourceOptions):
    file: Path = Field(description="JSONL file, one repository task per line (id, prompt, files, hidden_tests, ...)")


@register_importer("terminal-jsonl", TerminalJsonlOptions, argument="file")
def import_terminal_jsonl(options: TerminalJsonlOptions) -> list[Task]:
    """Repository tasks from JSONL: files, prompt and hidden tests, checked by workspace_tests."""
    if "workspace" not in Task.model_fields:
        raise UserError("terminal-jsonl needs a veriloop whose tasks have a workspace and an environment")
    return tasks_from_rows(options.file, lambda row, line: terminal_task_fields(row, options.file.name, line))
