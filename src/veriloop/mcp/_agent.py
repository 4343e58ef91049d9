"""An agent loop over MCP tools, written against the plain ``openai`` client.

    from veriloop.mcp import run_agent
    answer = run_agent("What is 1234 * 5678? Use the calculator.")   # OPENAI_BASE_URL, OPENAI_API_KEY

A run config can name it as a callable, ``veriloop.mcp:run_agent`` (or ``arun_agent`` from a
running event loop): it takes the task prompt, and everything else has a default. Each turn asks
the chat completions endpoint for an answer with the servers' tools; each tool call in it runs
through MCP and comes back as a ``role: "tool"`` message; the loop ends at the first answer that
calls no tool, whose text it returns, or after ``max_turns`` answers, returning the last one's
text (possibly empty). A tool error is text the model reads; an MCP server's failure
(``McpServerError``) and the endpoint's own errors propagate to the caller.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from typing import Any

from veriloop.core import UserError
from veriloop.mcp._client import McpToolResult, McpTools
from veriloop.mcp._config import VERILOOP_TOOLS, McpServer, mcp_servers

Prompt = str | Sequence[Mapping[str, Any]]


def run_agent(prompt: Prompt, **options: Any) -> str:
    """``arun_agent`` on an event loop of its own; the final answer's text."""
    return asyncio.run(arun_agent(prompt, **options))


async def arun_agent(
    prompt: Prompt,
    *,
    servers: Sequence[McpServer | Mapping[str, Any]] | None = None,
    model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    max_turns: int = 8,
    **completion: Any,
) -> str:
    """Answer ``prompt`` (text, or chat messages) with the tools of ``servers`` (default: those
    ``VERILOOP_MCP_SERVERS`` names, which a run's ``rollout.agent.mcp`` sets; else veriloop's own,
    ``VERILOOP_TOOLS``), at most ``max_turns`` chat completions.

    ``base_url`` and ``api_key`` default to ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` (the openai
    client's own defaults); ``model`` to ``OPENAI_MODEL``, else the first model the endpoint
    lists. ``completion`` is passed to every ``chat.completions.create`` (temperature, max_tokens...).
    """
    from openai import NOT_GIVEN, AsyncOpenAI

    if max_turns < 1:
        raise UserError(f"max_turns is {max_turns}: an agent needs at least one turn")
    servers = configured_servers() if servers is None else mcp_servers(servers)
    messages = opening_messages(prompt)
    answer = ""
    async with AsyncOpenAI(base_url=base_url, api_key=api_key) as client, McpTools(servers) as tools:
        model = model or os.environ.get("OPENAI_MODEL") or await served_model(client)
        for _ in range(max_turns):
            response = await client.chat.completions.create(
                model=model, messages=messages, tools=tools.tools or NOT_GIVEN, **completion
            )
            message = response.choices[0].message
            answer = message.content or ""
            messages.append(assistant_message(message))
            if not message.tool_calls:
                break
            messages += await tool_messages(tools, message.tool_calls)
    return answer


def opening_messages(prompt: Prompt) -> list[dict[str, Any]]:
    """The conversation a prompt opens: one user message for text, a copy of chat messages."""
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    return [dict(message) for message in prompt]


async def served_model(client: Any) -> str:
    """The first model the endpoint lists (a policy server serves one)."""
    listed = await client.models.list()
    if not listed.data:
        raise UserError(f"{client.base_url} lists no model: name one (model=... or OPENAI_MODEL)")
    return listed.data[0].id


def assistant_message(message: Any) -> dict[str, Any]:
    """An answer (``ChatCompletionMessage``) as the assistant message the next request sends back."""
    entry: dict[str, Any] = {"role": "assistant", "content": message.content}
    if message.tool_calls:
        entry["tool_calls"] = [call.model_dump(mode="json", exclude_none=True) for call in message.tool_calls]
    return entry


async def tool_messages(tools: McpTools, tool_calls: Sequence[Any]) -> list[dict[str, Any]]:
    """One ``role: "tool"`` message per call of an answer, the calls run in their order."""
    messages = []
    for call in tool_calls:
        function = getattr(call, "function", None)
        if function is None:  # a custom (free-text) tool call: these tools are functions
            result = McpToolResult(f"error: {call.type} tool calls are not supported; call a function", True)
        else:
            result = await tools.call(function.name, function.arguments)
        messages.append({"role": "tool", "tool_call_id": call.id, "content": result.text})
    return messages


SERVERS_VARIABLE = "VERILOOP_MCP_SERVERS"


def configured_servers() -> tuple[McpServer, ...]:
    """The servers ``VERILOOP_MCP_SERVERS`` names (a JSON list of server entries), else veriloop's own."""
    import json

    text = os.environ.get(SERVERS_VARIABLE)
    if not text:
        return (VERILOOP_TOOLS,)
    try:
        entries = json.loads(text)
    except ValueError as exc:
        raise UserError(f"{SERVERS_VARIABLE} is not JSON: {exc}") from None
    return mcp_servers(entries, SERVERS_VARIABLE)
