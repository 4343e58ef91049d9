"""What to run: one frozen record shared by every backend and by the service's native API."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import ConfigDict, Field, ValidationError, field_validator, model_validator

from veriloop.core import Record, Snapshot, UserError, describe_validation_error, workspace_path
from veriloop.sandbox._limits import MIB, Limits


class Job(Record):
    """One run: Python source for the warm interpreter, or a command line to execute.

    ``files`` are written into the fresh workspace (after ``snapshot`` is unpacked there, so
    they win over its files); ``capture`` asks for the workspace back as a Snapshot.
    """

    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")

    kind: Literal["python", "exec"]
    code: str = Field(default="", description="Python source, for kind 'python'")
    argv: tuple[str, ...] = Field(default=(), description="command and arguments, for kind 'exec'")
    files: dict[str, bytes] = Field(default_factory=dict, description="workspace path -> content")
    stdin: bytes = b""
    limits: Limits = Field(default_factory=Limits)
    snapshot: Snapshot | None = None
    capture: bool = False

    @field_validator("files")
    @classmethod
    def _paths_stay_inside(cls, files: dict[str, bytes]) -> dict[str, bytes]:
        return {workspace_path(name): content for name, content in files.items()}

    @field_validator("argv")
    @classmethod
    def _no_nul(cls, argv: tuple[str, ...]) -> tuple[str, ...]:
        if any("\x00" in arg for arg in argv):
            raise ValueError("command arguments may not hold NUL bytes")
        return argv

    @model_validator(mode="after")
    def _fits(self) -> Job:
        if self.kind == "exec" and not self.argv:
            raise ValueError("an 'exec' job needs a command (argv)")
        size = sum(len(c) for c in self.files.values()) + (len(self.snapshot.archive) if self.snapshot else 0)
        if size > self.limits.disk_mb * MIB:
            raise ValueError(f"files and snapshot take {size / MIB:.1f} MiB, more than disk_mb={self.limits.disk_mb}")
        return self


def make_job(
    kind: Literal["python", "exec"],
    *,
    code: str = "",
    argv: Sequence[str] = (),
    files: Mapping[str, str | bytes] | None = None,
    stdin: str | bytes | None = None,
    limits: Limits,
    snapshot: Snapshot | None = None,
    capture: bool = False,
) -> Job:
    """Build a Job from friendly Python values (text is UTF-8); bad values raise UserError."""
    encoded = {name: c.encode() if isinstance(c, str) else bytes(c) for name, c in (files or {}).items()}
    raw_stdin = stdin.encode() if isinstance(stdin, str) else bytes(stdin or b"")
    try:
        return Job(
            kind=kind,
            code=code,
            argv=tuple(argv),
            files=encoded,
            stdin=raw_stdin,
            limits=limits,
            snapshot=snapshot,
            capture=capture,
        )
    except ValidationError as exc:
        raise UserError(f"sandbox job: {describe_validation_error(exc)}") from None
