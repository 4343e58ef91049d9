"""A stdio MCP server in the sandbox: the transport an ``mcp.ClientSession`` reads and writes.

``BoxedStdio(server, on_end).streams()`` starts the entry's command in the sandbox's isolated
process (``veriloop.sandbox.start_isolated_process``: the entry's limits, no network, nothing of
the host writable) and pumps JSON-RPC messages, one per line, between the box's stdin and stdout
and the session's memory streams, as the MCP SDK's own ``stdio_client`` does. Unlike it:

- a line longer than ``max_message_bytes``, or one that is not a JSON-RPC message, breaks the
  transport (the protocol is broken, so no later answer can be trusted) and kills the box;
- stderr is drained into a bounded tail, quoted when the server fails;
- leaving ``streams`` kills the box at once (bubblewrap, and with it every process of the box)
  rather than waiting for the server to exit: nothing of an episode outlives it.

``on_end`` is called once, when the server's output ends or breaks; ``ending()`` says why.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from veriloop.mcp._config import McpServer
from veriloop.sandbox import start_isolated_process

STDERR_TAIL_BYTES = 2000
SERVER_WORKDIR = "/tmp/workspace"  # a server's working directory: empty, writable, its own
_EXIT_WAIT_S = 1.0  # after its output ends, how long the box is given to report its exit status


class BoxedStdio:
    """One stdio server's box and the pumps between its pipes and a client session."""

    def __init__(self, server: McpServer, on_end: Callable[[], None]):
        if server.command is None:
            raise ValueError("a boxed stdio transport needs a server with a command")
        self.server = server
        self.process: subprocess.Popen[bytes] | None = None
        self.broken: str | None = None
        self._on_end = on_end
        self._ended = False
        self._stderr_tail = b""

    @asynccontextmanager
    async def streams(self) -> AsyncIterator[tuple[Any, Any]]:
        """``(read_stream, write_stream)`` for ``mcp.ClientSession``, while the box lives."""
        import anyio

        assert self.server.command is not None
        self.process = start_isolated_process(
            list(self.server.command),
            self.server.limits(),
            env=self.server.env,
            keep_stderr=True,
            environment=self.server.environment,
            workdir=SERVER_WORKDIR,
        )
        loop = asyncio.get_running_loop()
        pipes: list[asyncio.BaseTransport] = []
        try:
            output = asyncio.StreamReader(limit=self.server.max_message_bytes)
            errors = asyncio.StreamReader()
            for reader, pipe in ((output, self.process.stdout), (errors, self.process.stderr)):
                transport, _ = await loop.connect_read_pipe(lambda r=reader: asyncio.StreamReaderProtocol(r), pipe)
                pipes.append(transport)
            transport, protocol = await loop.connect_write_pipe(
                lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader()), self.process.stdin
            )
            pipes.append(transport)
            writer = asyncio.StreamWriter(transport, protocol, None, loop)
            to_session, read_stream = anyio.create_memory_object_stream(0)
            write_stream, from_session = anyio.create_memory_object_stream(0)
            async with anyio.create_task_group() as pumps:
                pumps.start_soon(self._pump_out, output, to_session)
                pumps.start_soon(self._pump_in, from_session, writer)
                pumps.start_soon(self._drain_stderr, errors)
                try:
                    yield read_stream, write_stream
                finally:
                    pumps.cancel_scope.cancel()
        finally:
            self.kill()
            for pipe in pipes:
                pipe.close()

    async def _pump_out(self, output: asyncio.StreamReader, to_session: Any) -> None:
        import anyio
        from mcp.shared.message import SessionMessage
        from mcp.types import JSONRPCMessage

        async with to_session:
            while True:
                try:
                    line = await output.readline()
                except ValueError:  # the line passed the reader's limit
                    self._break(f"sent a message longer than {self.server.max_message_bytes} bytes")
                    return
                if not line:
                    await self._wait_for_exit()
                    self._end()
                    return
                if not line.strip():
                    continue
                try:
                    message = JSONRPCMessage.model_validate_json(line)
                except ValueError:
                    self._break(f"wrote a line that is not a JSON-RPC message: {line[:120]!r}")
                    return
                try:
                    await to_session.send(SessionMessage(message))
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return

    async def _pump_in(self, from_session: Any, writer: asyncio.StreamWriter) -> None:
        async with from_session:
            async for message in from_session:
                line = message.message.model_dump_json(by_alias=True, exclude_none=True) + "\n"
                try:
                    writer.write(line.encode())
                    await writer.drain()
                except (ConnectionError, OSError):  # the box is gone; its output's end says why
                    return

    async def _drain_stderr(self, errors: asyncio.StreamReader) -> None:
        while chunk := await errors.read(1 << 12):
            self._stderr_tail = (self._stderr_tail + chunk)[-STDERR_TAIL_BYTES:]

    async def _wait_for_exit(self) -> None:
        """Its output ended: give the box a moment to exit, so ``ending`` can give its status."""
        assert self.process is not None
        for _ in range(int(_EXIT_WAIT_S / 0.01)):
            if self.process.poll() is not None:
                return
            await asyncio.sleep(0.01)

    def _break(self, reason: str) -> None:
        self.broken = reason
        self.kill()
        self._end()

    def _end(self) -> None:
        if not self._ended:
            self._ended = True
            self._on_end()

    def kill(self) -> None:
        """Kill the box (bubblewrap, whose box dies with it) and reap it; safe to call again."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()

    def ending(self) -> str:
        """Why the server is gone: the protocol it broke or how it exited, and the end of its stderr."""
        if self.broken is not None:
            reason = self.broken
        else:
            status = None if self.process is None else self.process.poll()
            if status is None:
                reason = "closed its output"
            elif status > 128 and status - 128 in signal.valid_signals():
                reason = f"was killed ({signal.Signals(status - 128).name}; its CPU or memory limit, or a crash)"
            else:
                reason = f"exited with status {status}"
        tail = self._stderr_tail.decode("utf-8", errors="replace").strip()
        return f"{reason}; its stderr ended with: {tail[-600:]}" if tail else reason
