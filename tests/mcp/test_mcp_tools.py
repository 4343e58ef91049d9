"""MCP tools through real servers: veriloop's own, sandboxed over stdio; faulty ones; one over HTTP.

Every stdio server here runs in the sandbox's isolated process, as an episode's would.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest

from veriloop.core import UserError
from veriloop.mcp import VERILOOP_TOOLS, McpServer, McpServerError, McpTools, mcp_servers

pytest.importorskip("mcp")

FAULTY_SERVER = """
import os, sys, time
from mcp.server.fastmcp import FastMCP

server = FastMCP("faulty")

@server.tool()
def echo(text: str) -> str:
    return text

@server.tool()
def hang() -> str:
    time.sleep(3600)

@server.tool()
def crash() -> str:
    sys.stderr.write("giving up now\\n")
    sys.stderr.flush()
    os._exit(5)

@server.tool()
def babble() -> str:
    os.write(1, b"hello from the tool\\n")
    time.sleep(3600)

@server.tool()
def flood() -> str:
    return "x" * 100_000

@server.tool()
def spin() -> str:
    while True:
        pass

server.run("stdio")
"""


BARE_SERVER = r"""
import json, os, sys

def send(message):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    sys.stdout.flush()

for line in sys.stdin:
    request = json.loads(line)
    method, number = request.get("method"), request.get("id")
    if method == "initialize":
        info = {"name": "bare", "version": "1"}
        version = request["params"]["protocolVersion"]
        send({"id": number, "result": {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": info}})
    elif method == "tools/list":
        where = {"name": "where", "description": "Where the server runs.", "inputSchema": {"type": "object"}}
        send({"id": number, "result": {"tools": [where]}})
    elif method == "tools/call":
        import vl_wheel_pkg
        seen = {"value": vl_wheel_pkg.VALUE, "prefix": sys.prefix, "host_venv": os.path.exists(sys.argv[1])}
        send({"id": number, "result": {"content": [{"type": "text", "text": json.dumps(seen)}]}})
    elif number is not None:
        send({"id": number, "error": {"code": -32601, "message": "no such method"}})
"""
"""An MCP server of the standard library alone, answering the three requests a client makes."""


def faulty(marker: str = "", **fields) -> McpServer:
    """The faulty server above, with ``marker`` on its command line to find its processes by."""
    return McpServer(command=("python", "-I", "-c", FAULTY_SERVER, *([marker] if marker else [])), **fields)


def processes_with(marker: str) -> list[int]:
    """Live processes whose command line holds ``marker`` (the box's and bubblewrap's)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def gone(marker: str, within_s: float = 20.0) -> bool:
    """Whether every process with ``marker`` has ended, waiting for the kernel to tear a box down."""
    deadline = time.monotonic() + within_s
    while processes_with(marker):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


async def test_the_servers_tools_are_listed_as_openai_functions_with_their_schemas():
    async with McpTools([VERILOOP_TOOLS]) as tools:
        listed = {entry["function"]["name"]: entry for entry in tools.tools}
    assert set(listed) == {"calculate", "list_files", "read_file", "write_file"}
    assert all(entry["type"] == "function" and entry["function"]["description"] for entry in listed.values())
    calculate = listed["calculate"]["function"]["parameters"]
    assert calculate["type"] == "object" and calculate["required"] == ["expression"]
    assert calculate["properties"]["expression"]["type"] == "string"
    write = listed["write_file"]["function"]["parameters"]
    assert sorted(write["required"]) == ["content", "path"]
    assert listed["list_files"]["function"]["parameters"]["properties"]["path"]["default"] == "."


async def test_the_calculator_and_the_file_tools_work_through_the_sandboxed_server(tmp_path):
    async with McpTools([VERILOOP_TOOLS]) as tools:
        assert (await tools.call("calculate", '{"expression": "(17 + 4) * 3 / 2"}')).text == "31.5"
        assert (await tools.call("calculate", {"expression": "2 ** 100 % 7 - -1"})).text == "3"
        written = await tools.call("write_file", {"path": "notes/plan.txt", "content": "step one\n"})
        assert written.text == "wrote 9 bytes to notes/plan.txt" and not written.is_error
        assert (await tools.call("list_files", "{}")).text == "notes/\nnotes/plan.txt"
        assert (await tools.call("read_file", {"path": "notes/plan.txt"})).text == "step one\n"
        # The server's working directory is an empty folder of the box's private /tmp, not the
        # host's /tmp (nor does it list what the box binds under /tmp, a checkout or venv there).
        where = await tools.call("write_file", {"path": f"/tmp/workspace/{tmp_path.name}-planted", "content": "x"})
    assert not where.is_error and not Path(f"/tmp/workspace/{tmp_path.name}-planted").exists()


async def test_paths_that_leave_the_workspace_are_refused():
    async with McpTools([VERILOOP_TOOLS]) as tools:
        for name, arguments in [
            ("read_file", {"path": "../etc/passwd"}),
            ("read_file", {"path": "/etc/passwd"}),
            ("write_file", {"path": "../../escaped.txt", "content": "x"}),
            ("list_files", {"path": ".."}),
        ]:
            result = await tools.call(name, arguments)
            assert result.is_error and "is outside the workspace" in result.text, (name, arguments, result)


def test_a_link_out_of_the_workspace_is_refused(tmp_path):
    from veriloop.mcp.server import Workspace

    (tmp_path / "root").mkdir()
    (tmp_path / "secret.txt").write_text("gold")
    (tmp_path / "root" / "inside.txt").write_text("fine")
    (tmp_path / "root" / "door").symlink_to(tmp_path / "secret.txt")
    workspace = Workspace(tmp_path / "root")
    assert workspace.read("inside.txt") == "fine"
    with pytest.raises(ValueError, match="outside the workspace"):
        workspace.read("door")
    with pytest.raises(ValueError, match="outside the workspace"):
        workspace.write("door", "overwritten")
    assert (tmp_path / "secret.txt").read_text() == "gold"


def test_the_calculator_evaluates_arithmetic_only():
    from veriloop.mcp.server import MAX_RESULT_BITS, calculate

    assert calculate("7 // 2 + 7 % 2 + 2 ** -1") == 4.5
    assert calculate("-(3 - 10) * 1.5") == 10.5
    for expression, reason in [
        ("__import__('os').system('true')", "is not arithmetic"),
        ("(1).__class__", "is not arithmetic"),
        ("'a' * 3", "is not arithmetic"),
        ("True + 1", "is not arithmetic"),
        ("2 ** 10 ** 10", f"more than {MAX_RESULT_BITS} bits"),
        ("1 / 0", "division by zero"),
        ("(-8) ** 0.5", "not a real number"),
        ("1e308 * 10", "not a finite number"),
        ("1 +", "not an arithmetic expression"),
        ("1" * 3000, "longer than"),
    ]:
        with pytest.raises(ValueError, match=reason):
            calculate(expression)


async def test_what_the_model_gets_wrong_is_text_it_reads():
    async with McpTools([faulty()]) as tools:
        assert (await tools.call("echo", {"text": "hi"})).text == "hi"
        missing = await tools.call("echo", {"words": "hi"})
        wrong_type = await tools.call("echo", {"text": ["not", "text"]})
        unknown = await tools.call("teleport", {})
        not_json = await tools.call("echo", '{"text": ')
        not_object = await tools.call("echo", "[1, 2]")
    assert missing.is_error and "text" in missing.text and "Field required" in missing.text
    assert wrong_type.is_error and "valid string" in wrong_type.text
    assert unknown.is_error and "no tool named 'teleport'" in unknown.text and "echo" in unknown.text
    assert not_json.is_error and "not JSON" in not_json.text
    assert not_object.is_error and "must be a JSON object" in not_object.text


async def test_a_tool_that_raises_is_text_the_model_reads():
    async with McpTools([VERILOOP_TOOLS]) as tools:
        result = await tools.call("read_file", {"path": "missing.txt"})
        still_there = await tools.call("calculate", {"expression": "1 + 1"})
    assert result.is_error and result.text.endswith("missing.txt: No such file or directory")
    assert still_there.text == "2"  # a tool error leaves the server serving


async def test_a_server_that_cannot_start_is_an_infra_error_and_ends_the_others():
    marker = f"mcp-beside-{uuid.uuid4().hex}"
    broken = McpServer(command=("python", "-c", "import sys; sys.stderr.write('no luck here'); sys.exit(3)"))
    with pytest.raises(McpServerError, match=r"exited with status 3; its stderr ended with: no luck here"):
        async with McpTools([faulty(marker), broken]):
            pass
    assert gone(marker)


async def test_a_server_that_exits_during_a_call_is_an_infra_error():
    marker = f"mcp-crash-{uuid.uuid4().hex}"
    async with McpTools([faulty(marker)]) as tools:
        with pytest.raises(McpServerError, match=r"(?s)exited with status 5.*giving up now \(during a call of crash\)"):
            await tools.call("crash", {})
        with pytest.raises(McpServerError, match="failed earlier, before a call of echo: exited with status 5"):
            await tools.call("echo", {"text": "hi"})  # and stays failed
    assert gone(marker)


async def test_a_hanging_call_is_an_infra_error_within_its_limit_and_leaves_no_process():
    marker = f"mcp-hang-{uuid.uuid4().hex}"
    async with McpTools([faulty(marker, timeout_s=1)]) as tools:
        assert processes_with(marker)  # the box is up, so that its absence below means something
        with pytest.raises(McpServerError, match=r"gave no answer to a call of hang within 1 s"):
            await tools.call("hang", {})  # the tool sleeps an hour
        with pytest.raises(McpServerError, match=r"failed earlier, before a call of echo: gave no answer"):
            await tools.call("echo", {"text": "hi"})
    assert gone(marker)


async def test_a_server_that_breaks_the_protocol_is_an_infra_error():
    async with McpTools([faulty()]) as tools:
        with pytest.raises(McpServerError, match=r"not a JSON-RPC message: b'hello from the tool\\n'"):
            await tools.call("babble", {})


async def test_a_message_over_the_limit_is_an_infra_error():
    async with McpTools([faulty(max_message_bytes=10_000)]) as tools:
        with pytest.raises(McpServerError, match="longer than 10000 bytes"):
            await tools.call("flood", {})


async def test_a_server_past_its_cpu_budget_is_killed():
    async with McpTools([faulty(cpu_s=2, timeout_s=120)]) as tools:
        with pytest.raises(McpServerError, match="was killed"):
            await tools.call("spin", {})


async def test_no_process_outlives_an_episode():
    markers = [f"mcp-episode-{uuid.uuid4().hex}" for _ in range(2)]
    async with McpTools([faulty(markers[0]), faulty(markers[1], name="second")]) as tools:
        assert all(processes_with(m) for m in markers)
        assert (await tools.call("second_echo", {"text": "x"})).text == "x"
    assert all(gone(m) for m in markers)


async def test_a_cancelled_episode_leaves_no_process():
    marker = f"mcp-cancelled-{uuid.uuid4().hex}"
    calling = asyncio.Event()

    async def episode() -> None:
        async with McpTools([faulty(marker)]) as tools:
            calling.set()
            await tools.call("hang", {})

    task = asyncio.create_task(episode())
    await asyncio.wait_for(calling.wait(), timeout=120)
    assert processes_with(marker)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert gone(marker)


async def test_an_episode_cancelled_while_its_servers_start_leaves_no_process():
    marker = f"mcp-starting-{uuid.uuid4().hex}"
    silent = McpServer(command=("python", "-c", "import time; time.sleep(3600)", marker))

    async def episode() -> None:
        async with McpTools([silent]):
            pass

    task = asyncio.create_task(episode())
    deadline = time.monotonic() + 60
    while not processes_with(marker) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert processes_with(marker)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert gone(marker)


async def test_a_server_on_an_environment_sees_it_and_not_the_hosts_packages(wheel_environment):
    import sys

    bare = McpServer(command=("python", "-I", "-c", BARE_SERVER, sys.prefix), environment="vl-wheel")
    async with McpTools([bare]) as tools:
        seen = json.loads((await tools.call("where", {})).text)
    assert seen == {"value": 7, "prefix": wheel_environment.path, "host_venv": False}
    # veriloop's own server needs the host's packages: on an environment without them it cannot start.
    own = McpServer(command=VERILOOP_TOOLS.command, environment="vl-wheel")
    with pytest.raises(McpServerError, match="No module named 'veriloop'"):
        async with McpTools([own]):
            pass
    with pytest.raises(UserError, match="not built"):  # the user's to fix: no infrastructure failure
        async with McpTools([McpServer(command=("python",), environment="vl-never-built")]):
            pass


async def test_names_are_unique_across_servers_and_each_call_reaches_its_own_server():
    async with McpTools([VERILOOP_TOOLS, McpServer(command=VERILOOP_TOOLS.command, name="spare")]) as tools:
        names = sorted(entry["function"]["name"] for entry in tools.tools)
        await tools.call("veriloop-tools_write_file", {"path": "mine.txt", "content": "first"})
        in_spare = await tools.call("spare_list_files", {})
    assert names == sorted(
        [f"veriloop-tools_{n}" for n in ("calculate", "list_files", "read_file", "write_file")]
        + [f"spare_{n}" for n in ("calculate", "list_files", "read_file", "write_file")]
    )
    assert in_spare.text == "(empty)"  # each server has a box of its own


@contextmanager
def serving_over_http(root: Path):
    """veriloop's server as streamable HTTP on a free loopback port, in this process."""
    import uvicorn

    from veriloop.mcp.server import build_server

    server = uvicorn.Server(uvicorn.Config(build_server(root).streamable_http_app(), port=0, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


async def test_a_server_at_a_url_serves_its_tools(tmp_path):
    with serving_over_http(tmp_path) as url:
        async with McpTools([McpServer(url=url)]) as tools:
            names = {entry["function"]["name"] for entry in tools.tools}
            product = await tools.call("calculate", {"expression": "6 * 7"})
            await tools.call("write_file", {"path": "from-the-model.txt", "content": "over http"})
            refused = await tools.call("read_file", {"path": "../outside"})
    assert names == {"calculate", "list_files", "read_file", "write_file"}
    assert product.text == "42" and refused.is_error
    assert (tmp_path / "from-the-model.txt").read_text() == "over http"  # the real server's files


async def test_a_url_nobody_answers_is_an_infra_error():
    import socket

    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(McpServerError, match=rf"MCP server http://127.0.0.1:{port}/mcp: .*Connect"):
        async with McpTools([McpServer(url=f"http://127.0.0.1:{port}/mcp", start_timeout_s=20)]):
            pass


def test_server_entries_are_checked_with_their_place_named():
    servers = mcp_servers([{"command": ["python", "-m", "tools"], "env": {"TOKEN": "t"}}, {"url": "https://x.org/mcp"}])
    assert servers[0].command == ("python", "-m", "tools") and servers[1].url == "https://x.org/mcp"
    assert servers[0].limits().cpu_s == 300 and servers[0].limits().disk_mb == 64
    for entries, message in [
        ([{"command": ["a"], "url": "http://x"}], "^mcp_servers: field '0': give either a command .* or a url"),
        ([{"env": {"A": "b"}}], "either a command"),
        ([{"url": "http://x"}, {"command": []}], "field '1.command': a command is a non-empty list"),
        ([{"url": "ftp://x"}], "field '0.url': 'ftp://x' is not an http"),
        ({"url": "http://x"}, "^mcp_servers: Input should be a valid tuple"),
        ([{"command": ["a"], "env": {"1X": "y"}}], "'1X' is not an environment variable name"),
        ([{"url": "http://x", "memory_mb": 64}], "memory_mb apply to stdio servers"),
        ([{"url": "http://x", "environment": "sci"}], "environment apply to stdio servers"),
        ([{"command": ["a"], "name": "has space"}], "a server name is 1-32 letters"),
        ([{"command": ["a"], "timeout": 3}], "unknown field '0.timeout'"),
    ]:
        with pytest.raises(UserError, match=message):
            mcp_servers(entries)


async def test_an_answers_tool_calls_become_tool_messages():
    from openai.types.chat import ChatCompletionMessage

    from veriloop.mcp import assistant_message, opening_messages, tool_messages

    answer = ChatCompletionMessage.model_validate(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "calculate", "arguments": '{"expression": "6*7"}'},
                },
                {"id": "call_2", "type": "function", "function": {"name": "write_file", "arguments": '{"path": "a"}'}},
                {"id": "call_3", "type": "function", "function": {"name": "fly", "arguments": "{}"}},
            ],
        }
    )
    async with McpTools([VERILOOP_TOOLS]) as tools:
        replies = await tool_messages(tools, answer.tool_calls)
    assert opening_messages("What is 6*7?") == [{"role": "user", "content": "What is 6*7?"}]
    sent_back = assistant_message(answer)
    assert sent_back["role"] == "assistant" and sent_back["content"] is None
    assert json.loads(sent_back["tool_calls"][0]["function"]["arguments"]) == {"expression": "6*7"}
    assert [r["tool_call_id"] for r in replies] == ["call_1", "call_2", "call_3"]
    assert all(r["role"] == "tool" for r in replies)
    assert replies[0]["content"] == "42"
    assert "content" in replies[1]["content"] and "Field required" in replies[1]["content"]
    assert "no tool named 'fly'" in replies[2]["content"]


def test_the_server_runs_as_a_module_over_stdio(tmp_path):
    """``python -m veriloop.mcp.server`` outside any sandbox, driven by the SDK's own stdio client."""
    import sys

    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    (tmp_path / "given.txt").write_text("from the host")
    command = StdioServerParameters(
        command=sys.executable, args=["-m", "veriloop.mcp.server", "--root", str(tmp_path)], env=dict(os.environ)
    )

    async def read_it() -> str:
        async with stdio_client(command) as (read_stream, write_stream), ClientSession(read_stream, write_stream) as s:
            await s.initialize()
            result = await s.call_tool("read_file", {"path": "given.txt"})
            return result.content[0].text

    assert asyncio.run(read_it()) == "from the host"


async def test_an_agent_whose_endpoint_cannot_be_reached_raises_and_leaves_no_server():
    import socket

    import openai

    from veriloop.mcp import arun_agent

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    marker = f"mcp-agent-{uuid.uuid4().hex}"
    with pytest.raises(openai.APIConnectionError):
        await arun_agent(
            "What is 6 * 7?",
            servers=[faulty(marker)],
            model="policy",
            base_url=f"http://127.0.0.1:{port}/v1",
            api_key="unused",
        )
    assert gone(marker)
    with pytest.raises(UserError, match="at least one turn"):
        await arun_agent("What is 6 * 7?", max_turns=0)
