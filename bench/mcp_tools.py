"""MCP tools in the sandbox against the same server unsandboxed: what the box costs an episode.

Each episode starts veriloop's own MCP server (``python -I -m veriloop.mcp.server``), lists its
tools, makes ``--calls`` calculator calls and ends the server. ``sandboxed`` is ``McpTools``
(the server in the sandbox's isolated process, veriloop's transport); ``plain`` is the MCP SDK's
own ``stdio_client`` starting the same command as an ordinary child process. The two alternate,
episode by episode, in one process; the medians go into one JSON line (the last line).

    .venv/bin/python bench/mcp_tools.py [--episodes 6] [--calls 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time

from veriloop.mcp import VERILOOP_TOOLS, McpTools


async def sandboxed_episode(calls: int) -> tuple[float, float, float]:
    """(start s, seconds per call, end s) of one episode through ``McpTools``."""
    began = time.perf_counter()
    tools = McpTools([VERILOOP_TOOLS])
    await tools.__aenter__()
    started = time.perf_counter()
    try:
        for number in range(calls):
            result = await tools.call("calculate", {"expression": f"{number} * 7 + 1"})
            assert result.text == str(number * 7 + 1), result
        called = time.perf_counter()
    finally:
        await tools.aclose()
    ended = time.perf_counter()
    return started - began, (called - started) / calls, ended - called


async def plain_episode(calls: int, folder: str) -> tuple[float, float, float]:
    """(start s, seconds per call, end s) of one episode through the SDK's stdio client, unsandboxed."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    command = StdioServerParameters(command=sys.executable, args=["-I", "-m", "veriloop.mcp.server"], cwd=folder)
    began = time.perf_counter()
    async with stdio_client(command) as (read_stream, write_stream):
        async with ClientSession(read_stream, write_stream) as session:
            await session.initialize()
            await session.list_tools()
            started = time.perf_counter()
            for number in range(calls):
                result = await session.call_tool("calculate", {"expression": f"{number} * 7 + 1"})
                assert result.content[0].text == str(number * 7 + 1), result
            called = time.perf_counter()
    ended = time.perf_counter()
    return started - began, (called - started) / calls, ended - called


def medians(rows: list[tuple[float, float, float]]) -> dict[str, float]:
    start, call, end = (statistics.median(column) for column in zip(*rows))
    return {"start_s": round(start, 3), "call_ms": round(call * 1000, 2), "end_s": round(end, 3)}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=6)
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()
    sandboxed, plain = [], []
    with tempfile.TemporaryDirectory(prefix="veriloop-mcp-bench-") as folder:
        for _ in range(args.episodes):
            sandboxed.append(await sandboxed_episode(args.calls))
            plain.append(await plain_episode(args.calls, folder))
    boxed, bare = medians(sandboxed), medians(plain)
    result = {
        "bench": "mcp_tools",
        "episodes": args.episodes,
        "calls": args.calls,
        "sandboxed": boxed,
        "plain": bare,
        "start_ratio": round(boxed["start_s"] / bare["start_s"], 2),
        "call_ratio": round(boxed["call_ms"] / bare["call_ms"], 2),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    asyncio.run(main())
