"""Tools backed by the sandbox: run Python, run a shell command. The workspace persists.

Each call starts from the snapshot the previous call left, and captures a new one, so files
written on one turn are there on the next, while nothing else (processes, memory) survives.
"""

from __future__ import annotations

import threading
from typing import Any

from veriloop.core import ExecResult
from veriloop.rollout._actions import Action
from veriloop.rollout._episode import Observation


def format_observation(result: ExecResult) -> str:
    """What the model reads back from a run: output, errors, and how the run ended."""
    parts = []
    if result.stdout:
        parts.append(result.stdout)
    if result.stderr:
        parts.append(result.stderr)
    if result.status != "ok":
        ending = f"exit code {result.exit_code}" if result.status == "error" else result.status.replace("_", " ")
        parts.append(f"[{ending}]")
    return "\n".join(p.rstrip("\n") for p in parts) + "\n" if parts else "[no output]\n"


class SandboxTools:
    """``ToolExecutor`` over a ``veriloop.sandbox.Sandbox``; tasks on an environment run on a
    sandbox of that environment (with the same limits and workers), started on first use."""

    def __init__(self, sandbox: Any):
        self.sandbox = sandbox
        self._on_environment: dict[str, Any] = {}
        self._lock = threading.Lock()

    def sandbox_for(self, environment: str | None) -> Any:
        if environment is None:
            return self.sandbox
        with self._lock:
            if environment not in self._on_environment:
                from veriloop.sandbox import Sandbox

                self._on_environment[environment] = Sandbox(
                    limits=self.sandbox.limits, workers=self.sandbox.workers, environment=environment
                )
            return self._on_environment[environment]

    async def execute(self, action: Action, workspace: Any, environment: str | None = None) -> Observation:
        sandbox = self.sandbox_for(environment)
        if action.tool == "python":
            result = await sandbox.arun_python(action.argument, snapshot=workspace, capture=True)
        elif action.tool == "shell":
            result = await sandbox.arun(action.argument, snapshot=workspace, capture=True)
        else:
            raise ValueError(f"no sandbox tool for {action.tool!r}")
        return Observation(
            text=format_observation(result),
            failed=result.status != "ok",
            seconds=result.wall_s,
            workspace=result.snapshot if result.snapshot is not None else workspace,
            environment=result.environment,
        )

    def close(self) -> None:
        with self._lock:
            for sandbox in self._on_environment.values():
                sandbox.close()
            self._on_environment.clear()
        self.sandbox.close()
