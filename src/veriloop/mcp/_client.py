"""An episode's MCP tools: start or reach its servers, list their tools for the model, call them.

    async with McpTools([VERILOOP_TOOLS, McpServer(url="http://127.0.0.1:8000/mcp")]) as tools:
        tools.tools                                        # OpenAI-style `tools` entries
        result = await tools.call("calculate", '{"expression": "6 * 7"}')
        result.text                                        # the content of the `role: "tool"` message

Tool names are unique across servers: a name one server alone offers is kept; names two servers
share are prefixed with each server's name (its ``name`` field, else the name it reports), and
every name is made to fit OpenAI's ``[A-Za-z0-9_-]{1,64}``.

What the model did wrong is data: a tool it does not have, arguments that are not a JSON object,
arguments the server refuses and a tool that raised all come back as an ``McpToolResult`` with
``is_error`` set, whose text the model reads. What went wrong around it is not: a server that
cannot start, exits, hangs past its deadline, sends an oversized message or breaks the protocol
raises ``McpServerError``, an infrastructure failure (never a reward of 0). Leaving the ``async
with`` kills every stdio server's box, however it is left; a URL server's session is ended.

Each server's session is owned by a task of its own, so a transport that fails ends that task and
not the caller's; each exchange races its answer against the server's end and its deadline.
Boxes are started from the event loop's thread, which must outlive them (bubblewrap's
``--die-with-parent``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections import Counter
from collections.abc import AsyncIterator, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from veriloop.core import UserError
from veriloop.mcp._boxed_stdio import BoxedStdio
from veriloop.mcp._config import McpServer, mcp_servers

T = TypeVar("T")
_CLOSE_WAIT_S = 5.0  # how long a server's session may take to end (a URL server's DELETE) before it is cut
_MAX_TOOL_PAGES = 100
_SESSION_TERMINATED = 32600  # the SDK's HTTP client answers a request with it when the server forgot the session
_NOT_A_NAME = re.compile(r"[^A-Za-z0-9_-]")


class McpServerError(RuntimeError):
    """An MCP server failed as infrastructure: it could not start, exited, hung past its deadline,
    sent an oversized message or broke the protocol. Not the model's doing, never a reward."""

    def __init__(self, server: str, what: str):
        self.server = server
        super().__init__(f"MCP server {server}: {what}")


@dataclass(frozen=True)
class McpToolResult:
    """What a tool call gives the model: the text of its ``role: "tool"`` message, and whether it failed."""

    text: str
    is_error: bool = False


@dataclass(frozen=True)
class McpTool:
    """A tool as the model sees it (``name``, unique across servers) and as its server names it."""

    name: str
    server: int  # index of its server
    remote_name: str
    description: str
    parameters: dict[str, Any] = field(hash=False)

    def openai(self) -> dict[str, Any]:
        """The entry of a chat completion request's ``tools``."""
        function = {"name": self.name, "description": self.description, "parameters": self.parameters}
        return {"type": "function", "function": function}


class McpTools:
    """The tools of ``servers`` (``McpServer`` entries or their dicts), for one episode: the servers
    start when the ``async with`` is entered and end when it is left."""

    def __init__(self, servers: Sequence[McpServer | Mapping[str, Any]]):
        self.servers = mcp_servers(list(servers))
        self._connections: list[_Connection] = []
        self._tools: dict[str, McpTool] = {}

    async def __aenter__(self) -> McpTools:
        self._connections = [_Connection(server) for server in self.servers]
        try:
            listed = await asyncio.gather(*(c.open() for c in self._connections), return_exceptions=True)
        except BaseException:  # cancelled while the servers start: none may outlive this
            await self.aclose()
            raise
        failures = [r for r in listed if isinstance(r, BaseException)]
        if failures:
            await self.aclose()
            raise failures[0]
        self._tools = {tool.name: tool for tool in named_tools(self._connections, listed)}
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """End every server. The boxes are killed before the first wait, so even a close that is
        itself cancelled leaves no process behind."""
        for connection in self._connections:
            connection.kill()
        await asyncio.gather(*(c.close() for c in self._connections))

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The servers' tools as OpenAI-style ``tools`` entries (``{"type": "function", "function": ...}``)."""
        return [tool.openai() for tool in self._tools.values()]

    async def call(self, name: str, arguments: str | Mapping[str, Any] | None) -> McpToolResult:
        """Call the tool the model knows as ``name`` with ``arguments`` (the JSON text of a tool
        call, or its object). Raises ``McpServerError`` when the server fails as infrastructure."""
        tool = self._tools.get(name)
        if tool is None:
            known = ", ".join(self._tools) or "none"
            return McpToolResult(f"error: there is no tool named {name!r}; the tools are: {known}", is_error=True)
        parsed = _arguments(arguments)
        if isinstance(parsed, str):
            return McpToolResult(parsed, is_error=True)
        return await self._connections[tool.server].call(tool.remote_name, parsed)


class _Connection:
    """One server: its session, the task that owns it, and, for a stdio server, its box."""

    def __init__(self, server: McpServer):
        self.server = server
        self.session: Any = None
        self.box: BoxedStdio | None = None
        self.reported_name = ""
        self._ready = asyncio.Event()
        self._lost = asyncio.Event()
        self._closing = asyncio.Event()
        self._failure: Exception | None = None  # what ended the owning task, if it raised
        self._failed: str | None = None  # the server's first failure, as McpServerError said it
        self._owner: asyncio.Task[None] | None = None

    async def open(self) -> list[Any]:
        """Start the server (or reach it), initialise the session and list its tools."""
        self._owner = asyncio.create_task(self._own(), name=f"MCP server {self.server.label}")
        return await self._checked("start", self._start(), self.server.start_timeout_s)

    async def _own(self) -> None:
        from mcp import ClientSession

        try:
            async with contextlib.AsyncExitStack() as stack:
                read_stream, write_stream = await stack.enter_async_context(self._transport())
                self.session = await stack.enter_async_context(ClientSession(read_stream, write_stream))
                self._ready.set()
                await self._closing.wait()
        except Exception as exc:
            self._failure = exc
        finally:
            self._lost.set()

    def _transport(self) -> contextlib.AbstractAsyncContextManager[tuple[Any, Any]]:
        if self.server.url is not None:
            return _http_streams(self.server.url, max(self.server.start_timeout_s, self.server.timeout_s))
        self.box = BoxedStdio(self.server, on_end=self._lost.set)
        return self.box.streams()

    async def _start(self) -> list[Any]:
        await self._ready.wait()
        initialized = await self.session.initialize()
        self.reported_name = initialized.serverInfo.name
        page = await self.session.list_tools()
        tools = list(page.tools)
        for _ in range(_MAX_TOOL_PAGES):
            if not page.nextCursor:
                return tools
            page = await self.session.list_tools(cursor=page.nextCursor)
            tools += page.tools
        raise RuntimeError(f"it listed tools over more than {_MAX_TOOL_PAGES} pages")

    async def call(self, name: str, arguments: dict[str, Any]) -> McpToolResult:
        from mcp.shared.exceptions import McpError

        try:
            result = await self._exchange(
                f"a call of {name}", self.session.call_tool(name, arguments), self.server.timeout_s
            )
        except McpError as exc:
            if exc.error.code in _infrastructure_codes():
                raise self._fail(f"answered a call of {name} with: {exc.error.message}") from None
            return McpToolResult(f"error: {exc.error.message}", is_error=True)
        except (McpServerError, UserError):
            raise
        except Exception as exc:  # an answer that does not parse as MCP's, or a transport that broke
            raise self._fail(f"broke the protocol in a call of {name}: {exc}") from exc
        return McpToolResult(result_text(result), is_error=bool(result.isError))

    async def _checked(self, what: str, work: Coroutine[Any, Any, T], timeout_s: float) -> T:
        """``_exchange``, where any error the server answers with is also the server's failure."""
        try:
            return await self._exchange(what, work, timeout_s)
        except (McpServerError, UserError):
            raise
        except Exception as exc:
            raise self._fail(f"failed to {what}: {exc}") from exc

    async def _exchange(self, what: str, work: Coroutine[Any, Any, T], timeout_s: float) -> T:
        """``work``'s result, unless the server has failed, ends first or ``timeout_s`` passes:
        then the server is ended and ``McpServerError`` raised."""
        if self._failed is not None or self._lost.is_set():
            work.close()
            raise self._lost_error(what)
        answer = asyncio.ensure_future(work)
        lost = asyncio.ensure_future(self._lost.wait())
        try:
            done, _ = await asyncio.wait({answer, lost}, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            lost.cancel()
            if not answer.done():
                answer.cancel()
                await asyncio.wait({answer})
        if answer in done and not (self._lost.is_set() and answer.exception() is not None):
            return answer.result()
        if done:
            raise self._lost_error(what)
        raise self._fail(f"gave no answer to {what} within {timeout_s:g} s")

    def _fail(self, reason: str) -> McpServerError:
        """End the server, keep its first failure for later exchanges, and the error to raise now."""
        self._failed = self._failed or reason
        self.kill()
        return McpServerError(self.server.label, reason)

    def _lost_error(self, what: str) -> Exception:
        """The error of an exchange whose server has failed before or has just ended."""
        if isinstance(self._failure, UserError):  # e.g. an environment that is not built: the user's to fix
            return self._failure
        if self._failed is not None:
            return McpServerError(self.server.label, f"failed earlier, before {what}: {self._failed}")
        if self.box is not None and self.box.process is not None:
            reason = self.box.ending()
        elif self._failure is not None:
            reason = _first_cause(self._failure)
        else:
            reason = "ended"
        return self._fail(f"{reason} (during {what})")

    def kill(self) -> None:
        """End the server now: a stdio server's box is killed; a URL server's session is closed."""
        if self.box is not None:
            self.box.kill()
        self._closing.set()

    async def close(self) -> None:
        self.kill()
        if self._owner is None:
            return
        await asyncio.wait({self._owner}, timeout=_CLOSE_WAIT_S)
        if not self._owner.done():
            self._owner.cancel()
            await asyncio.wait({self._owner})
        if not self._owner.cancelled():
            self._owner.exception()  # retrieved: a failure is already told by the exchange that met it


@contextlib.asynccontextmanager
async def _http_streams(url: str, timeout_s: float) -> AsyncIterator[tuple[Any, Any]]:
    import httpx
    from mcp.client.streamable_http import streamable_http_client

    async with httpx.AsyncClient(timeout=httpx.Timeout(timeout_s)) as client:
        async with streamable_http_client(url, http_client=client) as (read_stream, write_stream, _):
            yield read_stream, write_stream


def named_tools(connections: Sequence[_Connection], listed: Sequence[Sequence[Any]]) -> list[McpTool]:
    """Every server's tools under names unique across servers (see the module's docstring)."""
    pairs = [(index, tool) for index, tools in enumerate(listed) for tool in tools]
    counts = Counter(_fit(tool.name) for _, tool in pairs)
    named, taken = [], set()
    for index, tool in pairs:
        name = _fit(tool.name)
        if counts[name] > 1:
            prefix = connections[index].server.name or connections[index].reported_name or f"server{index}"
            name = _fit(f"{prefix}_{tool.name}")
        unique, copy = name, 2
        while unique in taken:
            unique = _fit(f"{name[:60]}_{copy}")
            copy += 1
        taken.add(unique)
        parameters = dict(tool.inputSchema or {"type": "object", "properties": {}})
        named.append(McpTool(unique, index, tool.name, tool.description or "", parameters))
    return named


def _fit(name: str) -> str:
    """``name`` within OpenAI's function names: ``[A-Za-z0-9_-]``, 1 to 64 characters."""
    return _NOT_A_NAME.sub("_", name)[:64] or "tool"


def result_text(result: Any) -> str:
    """The text of a ``CallToolResult`` for the model: its text items, and a placeholder for each
    other item (an image, a resource that is not text)."""
    parts = []
    for item in result.content:
        if item.type == "text":
            parts.append(item.text)
        elif item.type == "resource":
            parts.append(getattr(item.resource, "text", None) or f"[resource {item.resource.uri}]")
        elif item.type == "resource_link":
            parts.append(f"[resource {item.uri}]")
        else:
            parts.append(f"[{item.type}: {getattr(item, 'mimeType', 'no type')}]")
    if not parts and result.structuredContent is not None:
        parts.append(json.dumps(result.structuredContent))
    return "\n".join(parts) if parts else "[no output]"


def _arguments(arguments: str | Mapping[str, Any] | None) -> dict[str, Any] | str:
    """The arguments as a dict, or the error text the model reads."""
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        return {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as exc:
            return f"error: the arguments are not JSON ({exc.msg} at character {exc.pos})"
    if not isinstance(arguments, Mapping):
        return "error: the arguments must be a JSON object"
    return dict(arguments)


def _infrastructure_codes() -> frozenset[int]:
    """JSON-RPC error codes that say the server failed, not the call: the connection closed, the
    session was forgotten, or the server did not understand a well-formed request."""
    from mcp.types import CONNECTION_CLOSED, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR

    return frozenset({CONNECTION_CLOSED, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR, _SESSION_TERMINATED})


def _first_cause(exc: BaseException) -> str:
    """The first leaf of an exception group (a task group's failure), as ``Type: message``."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"
