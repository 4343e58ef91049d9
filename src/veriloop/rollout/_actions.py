"""Tool calls in model text, and the instructions that tell a model how to make them.

A turn calls at most one tool, written as a tag: ``<run_python>CODE</run_python>``,
``<run_shell>COMMAND</run_shell>`` or ``<submit>ANSWER</submit>``. The last call in a turn
wins. A turn without a call is the episode's final answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

TOOL_TAGS = {"python": "run_python", "shell": "run_shell", "submit": "submit"}
_CALL = re.compile(r"<(run_python|run_shell|submit)>(.*?)</\1>", re.DOTALL)
_TAG_TO_TOOL = {tag: tool for tool, tag in TOOL_TAGS.items()}


@dataclass(frozen=True)
class Action:
    tool: str  # "python" | "shell" | "submit"
    argument: str


def parse_action(text: str, tools: tuple[str, ...]) -> Action | None:
    """The last enabled tool call in ``text``, or None when the turn calls no tool."""
    calls = [m for m in _CALL.finditer(text) if _TAG_TO_TOOL[m.group(1)] in tools]
    if not calls:
        return None
    last = calls[-1]
    return Action(tool=_TAG_TO_TOOL[last.group(1)], argument=last.group(2).strip("\n"))


def tool_instructions(tools: tuple[str, ...]) -> str:
    """A system message describing the enabled tools."""
    lines = ["You can use tools. Call at most one tool per reply; its result comes back to you."]
    if "python" in tools:
        lines.append("Run Python: <run_python>code</run_python>")
    if "shell" in tools:
        lines.append("Run a shell command: <run_shell>command</run_shell>")
    if "submit" in tools:
        lines.append("Give your final answer: <submit>answer</submit>")
    lines.append("Files you write persist between tool calls.")
    return "\n".join(lines)
