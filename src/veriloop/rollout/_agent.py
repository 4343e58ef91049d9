"""Running a user's agent program, unchanged, against the gateway.

An agent program is whatever the user already has: a command (``rollout.agent.command``) or a
Python function (``rollout.agent.callable: module:function``). Each run gets the episode's
OpenAI-compatible base URL in ``OPENAI_BASE_URL`` (calls made there are recorded as that
episode's), ``OPENAI_API_KEY``, and the task's prompt on standard input or as its last
argument; what it prints to standard output is its final answer (a function's return value,
as text or JSON). A function runs in a process of its own, as a command does (the OpenAI
clients it builds read the environment, which a process shares with nothing else), forked from
a warm process that imported its module once (``AgentHost``, ``_agent_host.py``), so an episode
does not pay the agent's imports again.

The program is trusted code of the user's, like a plugin: it runs on the host, not in the
sandbox, and what executes model-written code (tools, MCP servers, verifiers) is sandboxed.
A run that fails (non-zero exit, a crash, its time limit) is an infrastructure failure, not a
verdict on the model: the program's own errors are not the policy's.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from veriloop.core import UserError

ANSWER_LIMIT = 1 << 20  # bytes of standard output kept as the answer
STDERR_LIMIT = 4000  # characters of standard error kept for the report


class AgentProgram(BaseModel):
    """``rollout.agent``: the program that plays each episode against the gateway."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    command: tuple[str, ...] = Field(default=(), description="the program and its arguments, e.g. [python, agent.py]")
    callable: str = Field(default="", description="module:function called with the prompt, run in its own process")
    prompt: Literal["stdin", "argument"] = Field(
        default="stdin",
        description="how the task's prompt reaches a command: standard input, or a last argument (a function is "
        "called with it)",
    )
    timeout_s: float = Field(default=600.0, gt=0, description="one episode's wall-clock limit; then it is killed")
    env: dict[str, str] = Field(default_factory=dict, description="more environment variables for the program")
    cwd: str | None = Field(default=None, description="working directory of the program (default: the current one)")
    mcp: tuple[dict[str, Any], ...] = Field(
        default=(),
        description="MCP servers the program's tools come from ({command: [...]} stdio servers started per episode "
        "in the sandbox, or {url: ...}), given to it as VERILOOP_MCP_SERVERS (JSON); veriloop.mcp:run_agent uses them",
    )

    @model_validator(mode="after")
    def _one_program(self) -> AgentProgram:
        if bool(self.command) == bool(self.callable):
            raise ValueError("rollout.agent needs exactly one of command or callable")
        if self.callable and ":" not in self.callable:
            raise ValueError(f"rollout.agent.callable: {self.callable!r} is not module:function")
        return self

    def argv(self, prompt: str) -> list[str]:
        """The command line of one run of ``command``."""
        return [*self.command, prompt] if self.prompt == "argument" else list(self.command)


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


async def run_agent(
    program: AgentProgram,
    prompt: str,
    base_url: str,
    api_key: str,
    episode_id: str,
    model: str = "veriloop",
    host: AgentHost | None = None,
) -> AgentRun:
    """Run ``program`` once on ``prompt`` with its calls going to ``base_url`` (serving ``model``,
    given as ``OPENAI_MODEL`` unless the program's own environment names one). A function runs
    from ``host`` (its warm process, shared by a batch), else from a host of its own."""
    env = {
        **os.environ,
        "OPENAI_MODEL": model,
        **program.env,
        "OPENAI_BASE_URL": base_url,
        "OPENAI_API_KEY": api_key,
        "VERILOOP_EPISODE_ID": episode_id,
    }
    if program.mcp:
        env["VERILOOP_MCP_SERVERS"] = json.dumps(list(program.mcp))
    started = time.perf_counter()
    if program.callable:
        if host is not None:
            return await host.run(prompt, env, started)
        async with AgentHost(program) as own:
            return await own.run(prompt, env, started)
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


HOST_SCRIPT = Path(__file__).with_name("_agent_host.py")


class AgentHost:
    """A warm process that imported ``program.callable``'s module once and forks each episode
    (``_agent_host.py``); used as ``async with AgentHost(program) as host: await host.run(...)``
    on one event loop."""

    def __init__(self, program: AgentProgram):
        self.program = program
        self._process: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._waiting: dict[int, dict[str, asyncio.Future[int | None]]] = {}
        self._next = 0
        self._error = ""

    async def __aenter__(self) -> AgentHost:
        import tempfile

        self._stderr = tempfile.TemporaryFile()
        self._process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(HOST_SCRIPT),
            self.program.callable,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=self._stderr,
            cwd=os.path.abspath(self.program.cwd or os.getcwd()),
            start_new_session=True,
        )
        assert self._process.stdout is not None
        first = await self._process.stdout.readline()
        if not first:
            await self._process.wait()
            self._stderr.seek(0)
            tail = self._stderr.read().decode(errors="replace").strip()[-STDERR_LIMIT:]
            raise AgentHostError(f"the agent function {self.program.callable!r} could not be loaded: {tail}")
        self._reader = asyncio.get_running_loop().create_task(self._read())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._process is not None and self._process.returncode is None:
            assert self._process.stdin is not None
            self._process.stdin.close()  # the host kills what is left and exits
            try:
                await asyncio.wait_for(self._process.wait(), 10)
            except TimeoutError:
                _kill_group(self._process)
                await self._process.wait()
        if self._reader is not None:
            await self._reader
        self._stderr.close()

    async def run(self, prompt: str, env: dict[str, str], started: float) -> AgentRun:
        """One episode of the function: forked, given ``env``, killed at the program's time limit."""
        import tempfile

        assert self._process is not None and self._process.stdin is not None
        loop = asyncio.get_running_loop()
        number, self._next = self._next, self._next + 1
        futures = {"pid": loop.create_future(), "exit": loop.create_future()}
        self._waiting[number] = futures
        with tempfile.TemporaryDirectory(prefix="veriloop-agent-") as scratch:
            log, result = Path(scratch, "log"), Path(scratch, "result")
            request = {"id": number, "prompt": prompt, "env": env, "log": str(log), "result": str(result)}
            self._process.stdin.write((json.dumps(request) + "\n").encode())
            await self._process.stdin.drain()
            pid, code, timed_out = await futures["pid"], None, False
            try:
                if pid is not None:
                    code = await asyncio.wait_for(asyncio.shield(futures["exit"]), self.program.timeout_s)
            except TimeoutError:
                timed_out = True
            finally:
                if pid is not None:
                    _kill_session(pid)
                self._waiting.pop(number, None)
            stderr = (
                log.read_bytes()[-STDERR_LIMIT * 4 :].decode(errors="replace")[-STDERR_LIMIT:] if log.exists() else ""
            )
            answer = (
                result.read_bytes()[:ANSWER_LIMIT].decode(errors="replace") if code == 0 and result.exists() else ""
            )
        if code is None and not timed_out:  # the host itself ended: a failure, not an overrun
            code, stderr = 1, (stderr + "\n" + self._error)[-STDERR_LIMIT:]
        return AgentRun(answer=answer.strip(), exit_code=code, stderr=stderr, wall_s=time.perf_counter() - started)

    async def _read(self) -> None:
        """Hand the host's answers to the episodes waiting for them."""
        assert self._process is not None and self._process.stdout is not None
        while line := await self._process.stdout.readline():
            message = json.loads(line)
            futures = self._waiting.get(message["id"])
            if futures is None:
                continue
            key = "pid" if "pid" in message else "exit"
            if not futures[key].done():
                futures[key].set_result(message[key])
        self._error = "the agent host process ended"
        for futures in self._waiting.values():
            for future in futures.values():
                if not future.done():
                    future.set_result(None)


class AgentHostError(UserError):
    """The agent function's module could not be imported (a configuration problem, not the policy's)."""


def _kill_session(pid: int) -> None:
    """End a forked child's session (it and anything it started)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


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
