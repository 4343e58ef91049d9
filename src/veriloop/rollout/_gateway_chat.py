"""How the gateway shows a chat to the model: tools, tool calls, and token-exact continuations.

Tools reach the model through the chat template when the template reads a ``tools``
variable (transformers' ``apply_chat_template(..., tools=...)``; assistant ``tool_calls`` and
``role: "tool"`` messages are the template's to render). Otherwise the gateway's fallback
shows them: a system block listing each function's JSON signature (``tools_block``),
appended to the first system message or placed before the conversation; an assistant
message's tool calls as ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` lines
after its content; tool results as ``role: "tool"`` messages with their content unchanged.

The model's tool calls are read from its text in the Hermes/Qwen convention whatever the
template: each ``<tool_call>JSON</tool_call>`` block whose JSON is an object with a string
``name`` and an object ``arguments`` (or ``parameters``) becomes an OpenAI tool call, and
the text left around the blocks is the message's content.

A conversation continues a recorded call token for token (``ChatRenderer.continuation``):
the recorded prompt and sampled ids are kept as they are, and only the text the template
adds after the model's turn (the rest of its end-of-turn marker, the new messages, the next
generation prompt) is tokenized. The model's own text is never tokenized again.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Sequence
from typing import Any

_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.S)
_PROBE = "\u2063veriloop-turn-probe\u2063"  # content no template changes, to find what follows a turn

TOOLS_FALLBACK_HEADER = (
    "# Tools\n\nYou may call one or more functions to help with the request. "
    "Their signatures, one JSON object a line:\n<tools>\n"
)
TOOLS_FALLBACK_FOOTER = (
    "\n</tools>\n\nTo call a function, write its name and arguments as a JSON object within "
    '<tool_call></tool_call> tags:\n<tool_call>{"name": "<function name>", "arguments": {<arguments>}}</tool_call>'
)


class ChatRenderError(ValueError):
    """The chat template could not render a conversation (its message is the template's)."""


def tools_block(tools: Sequence[dict[str, Any]]) -> str:
    """The fallback system text that lists ``tools`` (OpenAI tool specs) for a template that cannot."""
    lines = "\n".join(json.dumps(tool.get("function", tool), ensure_ascii=False) for tool in tools)
    return TOOLS_FALLBACK_HEADER + lines + TOOLS_FALLBACK_FOOTER


def tool_call_text(call: dict[str, Any]) -> str:
    """One OpenAI tool call as the fallback writes it in an assistant message."""
    function = call["function"]
    shown = {"name": function["name"], "arguments": _arguments_value(function.get("arguments", "{}"))}
    return f"<tool_call>{json.dumps(shown, ensure_ascii=False)}</tool_call>"


def parse_tool_calls(text: str) -> tuple[str | None, list[dict[str, Any]]]:
    """``text``'s content (None when only tool calls remain) and its OpenAI ``tool_calls``.

    A block whose JSON does not parse, or lacks a string ``name``, stays in the content.
    """
    calls: list[dict[str, Any]] = []
    kept: list[str] = []
    position = 0
    for match in _TOOL_CALL.finditer(text):
        call = _tool_call(match.group(1))
        if call is not None:
            kept.append(text[position : match.start()])
            position = match.end()
            calls.append(call)
    if not calls:
        return text, []
    content = "".join([*kept, text[position:]]).strip()
    return content or None, calls


def _tool_call(block: str) -> dict[str, Any] | None:
    try:
        value = json.loads(block)
    except ValueError:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("name"), str) or not value["name"]:
        return None
    arguments = value.get("arguments", value.get("parameters", {}))
    if isinstance(arguments, str):
        arguments = _arguments_value(arguments)
    if not isinstance(arguments, dict):
        return None
    return {
        "id": f"call_{uuid.uuid4().hex[:24]}",
        "type": "function",
        "function": {"name": value["name"], "arguments": json.dumps(arguments, ensure_ascii=False)},
    }


def _arguments_value(arguments: Any) -> Any:
    """Tool-call arguments as a JSON value: a JSON string decoded, anything else as it is."""
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return arguments


def message_text(content: Any) -> str:
    """A message's content as text: a string, the text of its parts, or "" for none."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content)


def message_key(message: dict[str, Any]) -> tuple[Any, ...]:
    """What two messages must share to be the same message: role, text, tool calls (name and
    arguments; ids are the client's to renumber), and the tool call a result answers."""
    role = "system" if message["role"] == "developer" else message["role"]
    calls = tuple(
        (call["function"]["name"], json.dumps(_arguments_value(call["function"].get("arguments")), sort_keys=True))
        for call in message.get("tool_calls") or ()
    )
    return role, message_text(message.get("content")), calls, message.get("tool_call_id") or ""


def tools_key(tools: Sequence[dict[str, Any]] | None) -> str:
    return json.dumps(list(tools or ()), sort_keys=True)


def template_reads_tools(tokenizer: Any) -> bool:
    """Whether the tokenizer's chat template reads a ``tools`` variable."""
    template = tokenizer.chat_template
    if isinstance(template, dict):
        template = " ".join(template.values())
    return bool(template) and re.search(r"\btools\b", template) is not None


class ChatRenderer:
    """Renders and tokenizes conversations with one tokenizer's chat template (or the fallback)."""

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer
        self.native_tools = template_reads_tools(tokenizer)
        self.turn_end = self._turn_end()

    def render(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None, prompt: bool) -> str:
        """The template's text of ``messages`` (with the next assistant turn's opening when ``prompt``)."""
        import jinja2

        shown = [self._shown(message) for message in messages]
        options: dict[str, Any] = {}
        if tools and self.native_tools:
            options["tools"] = list(tools)
        elif tools:
            shown = _with_tools_block(shown, tools_block(tools))
        try:
            return self.tokenizer.apply_chat_template(shown, tokenize=False, add_generation_prompt=prompt, **options)
        except (jinja2.TemplateError, ValueError, TypeError, KeyError, IndexError) as exc:
            raise ChatRenderError(f"the chat template cannot render these messages: {exc}") from None

    def encode(self, text: str) -> list[int]:
        """Token ids of template text (its special tokens included, nothing added)."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def prompt_ids(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None) -> list[int]:
        """A fresh context: the whole conversation rendered and tokenized, ready for the reply."""
        return self.encode(self.render(messages, tools, prompt=True))

    def continuation(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]] | None,
        reply_at: int,
        recorded_ids: Sequence[int],
        ended_by_eos: bool,
    ) -> list[int] | None:
        """The prompt ids of ``messages``, whose message ``reply_at`` is the model's reply to a
        recorded call: ``recorded_ids`` (that call's prompt ids and sampled ids) as they are,
        then the tokens of the text that follows the reply. None when the template does not
        extend the conversation by appending (it rewrote an earlier part) or shows no
        end-of-turn text after an assistant message.

        When the sample ended with an end-of-sequence token that starts the template's
        end-of-turn text, that token stands for it and only the rest is added.
        """
        before = self.render(messages[: reply_at + 1], tools, prompt=False)
        whole = self.render(messages, tools, prompt=True)
        if self.turn_end is None or not before.endswith(self.turn_end) or not whole.startswith(before):
            return None
        bridge = self.turn_end
        if ended_by_eos and recorded_ids:
            eos_text = self.tokenizer.decode([recorded_ids[-1]], skip_special_tokens=False)
            bridge = bridge.removeprefix(eos_text) if eos_text and bridge.startswith(eos_text) else bridge
        return [*recorded_ids, *self.encode(bridge + whole[len(before) :])]

    def _shown(self, message: dict[str, Any]) -> dict[str, Any]:
        """A request message as the template (or the fallback) receives it."""
        role = "system" if message["role"] == "developer" else message["role"]
        shown: dict[str, Any] = {"role": role, "content": message_text(message.get("content"))}
        calls = message.get("tool_calls") or []
        if role == "assistant" and calls and not self.native_tools:
            shown["content"] = "\n".join([c for c in [shown["content"]] if c] + [tool_call_text(c) for c in calls])
        elif role == "assistant" and calls:
            shown["tool_calls"] = [_template_tool_call(call) for call in calls]
        elif role == "tool" and self.native_tools:
            shown.update({key: message[key] for key in ("tool_call_id", "name") if message.get(key)})
        return shown

    def _turn_end(self) -> str | None:
        """The template's text after an assistant message's content (ChatML: ``<|im_end|>\\n``)."""
        probe = [{"role": "user", "content": "?"}, {"role": "assistant", "content": _PROBE}]
        try:
            text = self.render(probe, None, prompt=False)
        except ChatRenderError:
            return None
        at = text.rfind(_PROBE)
        return text[at + len(_PROBE) :] if at >= 0 else None


def _template_tool_call(call: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI tool call as chat templates expect it: its arguments an object, not JSON text."""
    function = call["function"]
    return {
        "id": call.get("id", ""),
        "type": "function",
        "function": {"name": function["name"], "arguments": _arguments_value(function.get("arguments", "{}"))},
    }


def _with_tools_block(messages: list[dict[str, Any]], block: str) -> list[dict[str, Any]]:
    if messages and messages[0]["role"] == "system":
        first = messages[0]
        return [{**first, "content": f"{first['content']}\n\n{block}" if first["content"] else block}, *messages[1:]]
    return [{"role": "system", "content": block}, *messages]
