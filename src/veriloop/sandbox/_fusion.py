"""SandboxFusion's ``/run_code`` request and response, so tools built for it can use ours.

Only the fields those tools send and read are modelled; unknown request fields are ignored.
"""

from __future__ import annotations

import base64
import binascii
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from veriloop.core import ExecResult
from veriloop.sandbox._languages import CodeRun


class RunCodeRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    code: str
    language: str = "python"
    compile_timeout: float = Field(default=10.0, gt=0, le=3600)
    run_timeout: float = Field(default=10.0, gt=0, le=3600)
    memory_limit_MB: int = Field(default=-1, description="-1: the service's default")
    stdin: str | None = None
    files: dict[str, str | None] = Field(default_factory=dict, description="path -> base64 content")
    fetch_files: list[str] = Field(default_factory=list)

    def decoded_files(self) -> dict[str, bytes]:
        """The files as bytes; ValueError naming the first one that is not base64."""
        decoded = {}
        for name, content in self.files.items():
            try:
                decoded[name] = base64.b64decode(content or "", validate=True)
            except binascii.Error:
                raise ValueError(f"files[{name!r}] is not base64") from None
        return decoded


class CommandRunResult(BaseModel):
    status: Literal["Finished", "Error", "TimeLimitExceeded"]
    execution_time: float | None = None
    return_code: int | None = None
    stdout: str | None = None
    stderr: str | None = None


class RunCodeResponse(BaseModel):
    status: Literal["Success", "Failed", "SandboxError"]
    message: str = ""
    compile_result: CommandRunResult | None = None
    run_result: CommandRunResult | None = None
    executor_pod_name: str | None = None
    files: dict[str, str] = Field(default_factory=dict)


def _command_result(result: ExecResult) -> CommandRunResult:
    if result.status == "timeout":
        return CommandRunResult(
            status="TimeLimitExceeded", execution_time=result.wall_s, stdout=result.stdout, stderr=result.stderr
        )
    return_code = result.exit_code if result.exit_code is not None else -1
    return CommandRunResult(
        status="Finished",
        execution_time=result.wall_s,
        return_code=return_code,
        stdout=result.stdout,
        stderr=result.stderr,
    )


def fusion_response(outcome: CodeRun) -> RunCodeResponse:
    """SandboxFusion's answer for one CodeRun: Success only if every step exited 0."""
    failed = next((r for r in (outcome.build, outcome.run) if r is not None and not r.ok), None)
    message = f"{failed.status}: {failed.detail}" if failed is not None and failed.detail else ""
    return RunCodeResponse(
        status="Success" if outcome.ok else "Failed",
        message=message,
        compile_result=_command_result(outcome.build) if outcome.build else None,
        run_result=_command_result(outcome.run) if outcome.run else None,
        files={name: base64.b64encode(content).decode() for name, content in outcome.files.items()},
    )
