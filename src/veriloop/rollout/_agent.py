"""Running a user's agent program, unchanged, against the gateway.

An agent program is whatever the user already has: a command (``rollout.agent.command``) or a
Python function (``rollout.agent.callable: module:function``). Each run gets the episode's
OpenAI-compatible base URL in ``OPENAI_BASE_URL`` (calls made there are recorded as that
episode's), ``OPENAI_API_KEY``, and the task's prompt on standard input or as its last
argument; what it prints to standard output is its final answer (a function's return value,
printed as text or JSON). A function runs in a process of its own, as a command does: the
OpenAI clients it builds read the environment, which a process shares with nothing else.

The program is trusted code of the user's, like a plugin: it runs on the host, not in the
sandbox, and what executes model-written code (tools, MCP servers, verifiers) is sandboxed.
A run that fails (non-zero exit, a crash, its time limit) is an infrastructure failure, not a
verdict on the model: the program's own errors are not the policy's.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

ANSWER_LIMIT = 1 << 20  # bytes of standard output kept as the answer
STDERR_LIMIT = 4000  # characters of standard error kept for the report


class AgentProgram(BaseModel):
    """``rollout.agent``: the program that plays each episode against the gateway."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    command: tuple[str, ...] = Field(default=(), description="the program and its arguments, e.g. [python, agent.py]")
    callable: str = Field(default="", description="module:function called with the prompt, run in its own process")
    prompt: Literal["stdin", "argument"] = Field(
        default="stdin", description="how the task's prompt reaches the program: standard input, or a last argument"
    )
    timeout_s: float = Field(default=600.0, gt=0, description="one episode's wall-clock limit; then it is killed")
    env: dict[str, str] = Field(default_factory=dict, description="more environment variables for the program")
    cwd: str | None = Field(default=None, description="working directory of the program (default: the current one)")

    @model_validator(mode="after")
    def _one_program(self) -> AgentProgram:
        if bool(self.command) == bool(self.callable):
            raise ValueError("rollout.agent needs exactly one of command or callable")
        if self.callable and ":" not in self.callable:
            raise ValueError(f"rollout.agent.callable: {self.callable!r} is not module:function")
        return self

    def argv(self, prompt: str) -> list[str]:
        """The command line of one run."""
        base = list(self.command) if self.command else [sys.executable, "-m", "veriloop.rollout._agent_call"]
        if self.callable:
            base.append(self.callable)
        return [*base, prompt] if self.prompt == "argument" else base


@dataclass(frozen=True)
class AgentRun:
    """What one run of the program left: its answer (standard output, stripped) and how it ended."""

    answer: str
    exit_code: int | None  # None: killed at its time limit
    stderr: str
    wall_s: float

    @property
    def failed(self) -> bool:
        return self.exit_code != 0

    def failure(self) -> str:
        """Why the run counts as an infrastructure failure (empty when it does not)."""
        if self.exit_code is None:
            return f"the agent program did not finish within its time limit ({self.wall_s:.0f} s)"
        if self.exit_code != 0:
            tail = self.stderr.strip()[-STDERR_LIMIT:]
            return f"the agent program exited with code {self.exit_code}" + (f": {tail}" if tail else "")
        return ""


async def run_agent(program: AgentProgram, prompt: str, base_url: str, api_key: str, episode_id: str) -> AgentRun:
    """Run ``program`` once on ``prompt`` with its calls going to ``base_url``."""
    env = {
        **os.environ,
        **program.env,
        "OPENAI_BASE_URL": base_url,
        "OPENAI_API_KEY": api_key,
        "VERILOOP_EPISODE_ID": episode_id,
    }
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        *program.argv(prompt),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        cwd=program.cwd,
        start_new_session=True,  # its children end with it
    )
    stdin = prompt.encode() if program.prompt == "stdin" else b""
    try:
        out, err = await asyncio.wait_for(_communicate(process, stdin), timeout=program.timeout_s)
        code: int | None = process.returncode
    except TimeoutError:
        out, err, code = b"", b"", None
    finally:
        _kill_group(process)
        if process.returncode is None:
            await process.wait()
    return AgentRun(
        answer=out.decode(errors="replace").strip(),
        exit_code=code,
        stderr=err.decode(errors="replace")[-STDERR_LIMIT:],
        wall_s=time.perf_counter() - started,
    )


async def _communicate(process: asyncio.subprocess.Process, stdin: bytes) -> tuple[bytes, bytes]:
    """Standard output (at most ``ANSWER_LIMIT`` bytes kept) and error, once the program exits."""
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    try:
        process.stdin.write(stdin)
        await process.stdin.drain()
    except (BrokenPipeError, ConnectionResetError):
        pass  # a program that does not read its standard input
    process.stdin.close()

    async def bounded(stream: asyncio.StreamReader) -> bytes:
        kept = bytearray()
        while chunk := await stream.read(1 << 16):
            kept += chunk[: max(0, ANSWER_LIMIT - len(kept))]
        return bytes(kept)

    out, err = await asyncio.gather(bounded(process.stdout), bounded(process.stderr))
    await process.wait()
    return out, err


def _kill_group(process: asyncio.subprocess.Process) -> None:
    """End the program's process group (anything it started), if any of it is left."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def prompt_text(prompt: str | list | tuple) -> str:
    """The text an agent program gets: the prompt itself, or a chat prompt's last user message."""
    if isinstance(prompt, str):
        return prompt
    users = [m for m in prompt if (m["role"] if isinstance(m, dict) else m.role) == "user"]
    last = users[-1] if users else prompt[-1]
    return last["content"] if isinstance(last, dict) else last.content
