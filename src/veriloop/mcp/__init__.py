"""Layer 3: MCP (Model Context Protocol) tools for episodes, and an agent loop over them.

    from veriloop.mcp import VERILOOP_TOOLS, McpServer, McpTools, run_agent

    async with McpTools([VERILOOP_TOOLS, McpServer(url="http://127.0.0.1:8000/mcp")]) as tools:
        tools.tools                                              # OpenAI-style `tools` entries
        (await tools.call("calculate", '{"expression": "6 * 7"}')).text   # "42"

    answer = run_agent("What is 6 * 7?")                         # OPENAI_BASE_URL, OPENAI_API_KEY

A stdio server (``McpServer(command=[...])``) runs in the sandbox's isolated process, one per
episode, under the entry's limits; a URL server is reached over streamable HTTP. What the model
does wrong is a tool result it reads; a server that fails raises ``McpServerError``, an
infrastructure failure. ``veriloop.mcp.server`` is veriloop's own server (``python -I -m
veriloop.mcp.server``): a calculator and the files of its working directory.

``mcp`` and ``openai`` (the ``agents`` extra) are imported when a server is started or an agent
runs, so this package imports without them.
"""

from veriloop.mcp._agent import arun_agent, assistant_message, opening_messages, run_agent, tool_messages
from veriloop.mcp._client import McpServerError, McpTool, McpTools, McpToolResult, result_text
from veriloop.mcp._config import VERILOOP_TOOLS, McpServer, mcp_servers

__all__ = [
    "VERILOOP_TOOLS",
    "McpServer",
    "McpServerError",
    "McpTool",
    "McpToolResult",
    "McpTools",
    "arun_agent",
    "assistant_message",
    "mcp_servers",
    "opening_messages",
    "result_text",
    "run_agent",
    "tool_messages",
]
