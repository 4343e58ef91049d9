"""The OpenAI wire format the gateway speaks: requests it accepts, answers and errors it sends.

Requests are read leniently where OpenAI clients send fields that change nothing (``user``,
``metadata``, ``parallel_tool_calls``, an assistant message's ``refusal``: ignored) and
strictly where a field would change what is sampled: a sampling option the engines cannot
honour (penalties, ``logit_bias``, top log-probs, JSON modes, ``echo``, ``suffix``) is a 400
naming it, never silently dropped. ``top_k`` and ``return_token_ids`` (answers carry
``prompt_token_ids`` and per choice ``token_ids``) are vLLM's extensions, read here too.
Every error is OpenAI's shape: ``{"error": {"message", "type", "param", "code"}}``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

MAX_STOP_STRINGS = 16


class OpenAIError(Exception):
    """An answer in OpenAI's error shape."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None, kind: str = ""):
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.kind = kind or ("server_error" if status >= 500 else "invalid_request_error")

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}


def validation_error(exc: ValidationError) -> OpenAIError:
    """A request's first problem as a 400 naming its field (``messages.0.role``)."""
    first = exc.errors()[0]
    param = ".".join(str(part) for part in first["loc"]) or None
    message = first["msg"].removeprefix("Value error, ")
    return OpenAIError(400, f"{param}: {message}" if param else message, param=param)


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class FunctionCall(_Lenient):
    name: str = Field(min_length=1)
    arguments: str = "{}"

    @field_validator("arguments", mode="before")
    @classmethod
    def _as_text(cls, value: Any) -> Any:
        import json

        return json.dumps(value) if isinstance(value, dict) else value


class ToolCall(_Lenient):
    id: str = ""
    type: Literal["function"] = "function"
    function: FunctionCall


class ChatMessage(_Lenient):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None

    @field_validator("content")
    @classmethod
    def _text_parts_only(cls, content: Any) -> Any:
        for part in content if isinstance(content, list) else ():
            if part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise ValueError("only text content parts ({'type': 'text', 'text': ...}) are supported")
        return content

    @model_validator(mode="after")
    def _has_content(self) -> ChatMessage:
        if self.content is None and not (self.role == "assistant" and self.tool_calls):
            raise ValueError(f"a {self.role} message needs content")
        return self


class FunctionSpec(_Lenient):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=dict)


class ToolSpec(_Lenient):
    type: Literal["function"]
    function: FunctionSpec


class _Sampling(_Lenient):
    model: str = ""
    n: int = Field(default=1, ge=1)
    seed: int | None = Field(default=None, ge=0, lt=2**63)
    temperature: float = Field(default=1.0, ge=0, le=2)
    top_p: float = Field(default=1.0, gt=0, le=1)
    top_k: int = Field(default=0, ge=-1)
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    return_token_ids: bool = False
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    logit_bias: dict[str, float] | None = None

    @field_validator("stop")
    @classmethod
    def _stop_strings(cls, stop: Any) -> Any:
        strings = [stop] if isinstance(stop, str) else stop or []
        if len(strings) > MAX_STOP_STRINGS or any(not s for s in strings):
            raise ValueError(f"at most {MAX_STOP_STRINGS} non-empty stop strings")
        return stop

    def stop_strings(self) -> tuple[str, ...]:
        return (self.stop,) if isinstance(self.stop, str) else tuple(self.stop or ())

    def unsupported(self) -> OpenAIError | None:
        """The first option set that the engines cannot honour."""
        for name in ("frequency_penalty", "presence_penalty"):
            if getattr(self, name):
                return OpenAIError(400, f"{name} is not supported (only 0)", param=name)
        if self.logit_bias:
            return OpenAIError(400, "logit_bias is not supported", param="logit_bias")
        return None

    def include_usage(self) -> bool:
        return bool((self.stream_options or {}).get("include_usage"))


class ChatRequest(_Sampling):
    messages: list[ChatMessage] = Field(min_length=1)
    tools: list[ToolSpec] | None = None
    tool_choice: Literal["none", "auto", "required"] | dict[str, Any] | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    logprobs: bool = False
    top_logprobs: int | None = None
    response_format: dict[str, Any] | None = None

    def unsupported(self) -> OpenAIError | None:
        if self.top_logprobs:
            return OpenAIError(400, "top_logprobs is not supported (the sampled token's log-prob is)", "top_logprobs")
        if self.response_format and self.response_format.get("type", "text") != "text":
            return OpenAIError(400, "response_format: only text (no constrained decoding)", param="response_format")
        if isinstance(self.tool_choice, dict) and self.chosen_function() not in {
            t.function.name for t in self.tools or ()
        }:
            return OpenAIError(400, "tool_choice names a function that is not in tools", param="tool_choice")
        return super().unsupported()

    def chosen_function(self) -> str | None:
        return (
            ((self.tool_choice or {}).get("function") or {}).get("name") if isinstance(self.tool_choice, dict) else None
        )

    def shown_tools(self) -> list[dict[str, Any]]:
        """The tools the model is shown: none for ``tool_choice: none``, one when it names one."""
        if self.tool_choice == "none" or not self.tools:
            return []
        chosen = self.chosen_function()
        return [t.model_dump(exclude_unset=True) for t in self.tools if chosen is None or t.function.name == chosen]

    def message_dicts(self) -> list[dict[str, Any]]:
        return [message.model_dump(exclude_none=True) for message in self.messages]

    def requested_max_tokens(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens


class CompletionRequest(_Sampling):
    prompt: str | list[str] | list[int] | list[list[int]]
    max_tokens: int | None = Field(default=16, ge=1)
    logprobs: int | None = Field(default=None, ge=0)
    echo: bool = False
    suffix: str | None = None
    best_of: int | None = None

    @field_validator("prompt")
    @classmethod
    def _not_empty(cls, prompt: Any) -> Any:
        if not prompt or (isinstance(prompt, list) and any(isinstance(p, (str, list)) and not p for p in prompt)):
            raise ValueError("an empty prompt")
        return prompt

    def prompts(self) -> list[str | list[int]]:
        """The prompts of the request: texts or token-id lists."""
        prompt = self.prompt
        if isinstance(prompt, str):
            return [prompt]
        if prompt and isinstance(prompt[0], int):
            return [list(prompt)]  # type: ignore[arg-type]
        return list(prompt)  # type: ignore[arg-type]

    def unsupported(self) -> OpenAIError | None:
        if self.echo:
            return OpenAIError(400, "echo is not supported", param="echo")
        if self.suffix:
            return OpenAIError(400, "suffix is not supported", param="suffix")
        if self.best_of is not None and self.best_of != self.n:
            return OpenAIError(400, "best_of is not supported (use n)", param="best_of")
        return super().unsupported()


def response_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


def token_logprobs(tokens: Sequence[str], logprobs: Sequence[float]) -> list[dict[str, Any]]:
    """Chat ``logprobs.content``: each sampled token's text and log-prob (no alternatives; no bytes,
    since a token may hold part of a character)."""
    return [{"token": t, "logprob": lp, "bytes": None, "top_logprobs": []} for t, lp in zip(tokens, logprobs)]


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def chat_chunks(answer: dict[str, Any], include_usage: bool) -> list[dict[str, Any]]:
    """A whole chat answer as the chunks of a stream: per choice its role, its content and tool
    calls with its log-probs, then its finish reason; the usage last when asked for."""
    base = {
        "id": answer["id"],
        "object": "chat.completion.chunk",
        "created": answer["created"],
        "model": answer["model"],
    }
    chunks = []
    for choice in answer["choices"]:
        message, index = choice["message"], choice["index"]
        delta: dict[str, Any] = {"content": message.get("content") or ""}
        if message.get("tool_calls"):
            delta["tool_calls"] = [{"index": i, **call} for i, call in enumerate(message["tool_calls"])]
        chunks += [
            {
                **base,
                "choices": [{"index": index, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}],
            },
            {
                **base,
                "choices": [{"index": index, "delta": delta, "logprobs": choice["logprobs"], "finish_reason": None}],
            },
            {**base, "choices": [{"index": index, "delta": {}, "finish_reason": choice["finish_reason"]}]},
        ]
    if include_usage:
        chunks.append({**base, "choices": [], "usage": answer["usage"]})
    return chunks


def completion_chunks(answer: dict[str, Any], include_usage: bool) -> list[dict[str, Any]]:
    """A whole completions answer as a stream: one chunk per choice, then the usage when asked for."""
    base = {"id": answer["id"], "object": "text_completion", "created": answer["created"], "model": answer["model"]}
    chunks = [{**base, "choices": [choice]} for choice in answer["choices"]]
    if include_usage:
        chunks.append({**base, "choices": [], "usage": answer["usage"]})
    return chunks


def now() -> int:
    return int(time.time())
