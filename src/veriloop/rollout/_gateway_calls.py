"""What the gateway does with one chat or completions request: build the prompt ids (continuing
a recorded reply token for token when the messages allow), sample, answer in OpenAI's
shape, and hand the calls to record to the caller.

A reply is continued when the request's messages are a recorded request's messages, then
the assistant message the gateway returned for it (content and tool calls), then anything
new; its prompt is that call's prompt and sampled ids, then the tokens of what follows
(``ChatRenderer.continuation``). Otherwise the conversation is rendered afresh; if its ids
still happen to start with a recorded call's prompt and sampled ids, the call extends it all
the same, and if not, the episode's context splits (``GatewayCall.split``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from veriloop.rollout._gateway_chat import (
    ChatRenderer,
    ChatRenderError,
    message_key,
    parse_tool_calls,
    tools_key,
)
from veriloop.rollout._gateway_episodes import OpenEpisode, Reply
from veriloop.rollout._gateway_protocol import (
    ChatRequest,
    CompletionRequest,
    OpenAIError,
    now,
    response_id,
    token_logprobs,
    usage,
)
from veriloop.rollout._gateway_records import GatewayCall, SplitReason
from veriloop.rollout._sampling import Sample, SamplingParams

_FINISH = {"eos": "stop", "stop": "stop", "length": "length", "repetition": "length"}
Recorded = list[tuple[GatewayCall, Reply | None]]


@dataclass(frozen=True)
class GatewayLimits:
    """Bounds on what one request may ask for."""

    max_tokens: int = 4096  # new tokens per choice
    max_n: int = 16  # choices per request (and prompts per completions request)
    max_body_bytes: int = 4 << 20
    # Sampling every request gets whatever it asks (None: the request's own). A trainer fixes them:
    # it scores the sampled tokens under its own temperature and truncation.
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    clamp_max_tokens: bool = False  # a request asking more than max_tokens gets max_tokens, not a 400


@dataclass(frozen=True)
class _Plan:
    ids: list[int]
    extends: int | None
    split: SplitReason | None


class GatewayCalls:
    """Answers chat and completions requests from ``engine`` (a token-level engine)."""

    def __init__(self, engine: Any, model_name: str, policy_version: Callable[[], int], limits: GatewayLimits):
        self.engine = engine
        self.tokenizer = engine.tokenizer
        self.renderer = ChatRenderer(engine.tokenizer)
        self.model_name = model_name
        self.policy_version = policy_version
        self.limits = limits

    async def chat(self, request: ChatRequest, episode: OpenEpisode, number: int) -> tuple[dict[str, Any], Recorded]:
        """The answer to a chat request of ``episode`` (its ``number``-th) and the calls to record."""
        self._check(request)
        messages, tools = request.message_dicts(), request.shown_tools()
        keys, tool_key = [message_key(m) for m in messages], tools_key(tools)
        try:
            plan = self._chat_plan(episode, messages, tools, keys, tool_key)
        except ChatRenderError as exc:
            raise OpenAIError(400, str(exc), param="messages") from None
        params = self._params(request, [plan.ids], request.requested_max_tokens(), episode, number)
        version = self.policy_version()
        [samples] = await self._sample(episode, [plan.ids], params)
        choices, recorded = [], []
        for index, sample in enumerate(samples):
            message, finish = self._reply(sample, params.stop, parse_tools=bool(tools))
            choices.append(self._chat_choice(request, index, sample, message, finish))
            call = GatewayCall(
                index=0,
                request=number,
                choice=index,
                model=request.model,
                messages=tuple(messages),
                tools=tuple(tools),
                prompt_token_ids=tuple(plan.ids),
                sampled_token_ids=sample.token_ids,
                logprobs=sample.logprobs,
                text=message["content"] or "",
                message=message,
                finish_reason=finish,
                policy_version=version,
                extends=plan.extends,
                split=plan.split,
            )
            reply = Reply(
                call=0,
                tools=tool_key,
                messages=tuple(keys),
                reply=message_key(message),
                recorded_ids=(*plan.ids, *sample.token_ids),
                ended_by_eos=sample.finish_reason == "eos",
            )
            recorded.append((call, reply))
        answer = self._answer("chatcmpl", "chat.completion", request, choices, [plan.ids], samples)
        return answer, recorded

    def _reply(self, sample: Sample, stop: Sequence[str], parse_tools: bool) -> tuple[dict[str, Any], str]:
        """The assistant message returned for ``sample`` (tool calls read from its text when the
        request had tools) and its finish reason."""
        content: str | None = self._visible_text(sample, stop)
        calls: list[dict[str, Any]] = []
        if parse_tools:
            content, calls = parse_tool_calls(content or "")
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = calls
        return message, "tool_calls" if calls else _FINISH[sample.finish_reason]

    def _chat_choice(
        self, request: ChatRequest, index: int, sample: Sample, message: dict[str, Any], finish: str
    ) -> dict[str, Any]:
        choice: dict[str, Any] = {"index": index, "message": message, "logprobs": None, "finish_reason": finish}
        if request.logprobs:
            choice["logprobs"] = {"content": token_logprobs(self._token_texts(sample), sample.logprobs)}
        if request.return_token_ids:
            choice["token_ids"] = list(sample.token_ids)
        return choice

    async def complete(
        self, request: CompletionRequest, episode: OpenEpisode, number: int
    ) -> tuple[dict[str, Any], Recorded]:
        """The answer to a completions request (each prompt ``n`` choices, in prompt order)."""
        self._check(request)
        prompts = request.prompts()
        if len(prompts) * request.n > self.limits.max_n:
            raise OpenAIError(400, f"at most {self.limits.max_n} choices a request (prompts times n)", param="prompt")
        ids = [self._completion_ids(prompt) for prompt in prompts]
        params = self._params(request, ids, request.max_tokens, episode, number)
        version = self.policy_version()
        plans = [self._token_plan(episode, prompt_ids) for prompt_ids in ids]
        grouped = await self._sample(episode, ids, params)
        choices, recorded, samples = [], [], []
        for prompt, plan, group in zip(prompts, plans, grouped):
            for sample in group:
                text = self._visible_text(sample, params.stop)
                finish = _FINISH[sample.finish_reason]
                choice: dict[str, Any] = {
                    "index": len(choices),
                    "text": text,
                    "logprobs": None,
                    "finish_reason": finish,
                }
                if request.logprobs is not None:
                    choice["logprobs"] = _completion_logprobs(self._token_texts(sample), sample.logprobs)
                if request.return_token_ids:
                    choice.update(prompt_token_ids=plan.ids, token_ids=list(sample.token_ids))
                choices.append(choice)
                samples.append(sample)
                call = GatewayCall(
                    index=0,
                    request=number,
                    choice=len(recorded),
                    endpoint="completions",
                    model=request.model,
                    prompt=prompt if isinstance(prompt, str) else None,
                    prompt_token_ids=tuple(plan.ids),
                    sampled_token_ids=sample.token_ids,
                    logprobs=sample.logprobs,
                    text=text,
                    finish_reason=finish,
                    policy_version=version,
                    extends=plan.extends,
                    split=plan.split,
                )
                recorded.append((call, None))
        answer = self._answer("cmpl", "text_completion", request, choices, ids, samples, token_ids=False)
        return answer, recorded

    def _check(self, request: ChatRequest | CompletionRequest) -> None:
        problem = request.unsupported()
        if problem is not None:
            raise problem
        if request.n > self.limits.max_n:
            raise OpenAIError(400, f"n: at most {self.limits.max_n} choices a request", param="n")

    def _chat_plan(
        self,
        episode: OpenEpisode,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        keys: list[tuple[Any, ...]],
        tool_key: str,
    ) -> _Plan:
        continued = episode.continued(tool_key, keys)
        for reply in continued:
            ids = self.renderer.continuation(
                messages, tools, len(reply.messages), reply.recorded_ids, reply.ended_by_eos
            )
            if ids is not None:
                return _Plan(ids, reply.call, None)
        plan = self._token_plan(episode, self.renderer.prompt_ids(messages, tools))
        if plan.split is not None and continued:
            return _Plan(plan.ids, None, "template")
        return plan

    def _token_plan(self, episode: OpenEpisode, ids: list[int]) -> _Plan:
        """A prompt built without a recorded reply: it extends a call when its ids happen to."""
        extends = episode.extended_call(ids)
        split: SplitReason | None = "history_changed" if extends is None and episode.calls else None
        return _Plan(ids, extends, split)

    def _completion_ids(self, prompt: str | list[int]) -> list[int]:
        if isinstance(prompt, str):
            return list(self.tokenizer(prompt)["input_ids"])
        vocabulary = len(self.tokenizer)
        if any(not 0 <= token < vocabulary for token in prompt):
            raise OpenAIError(400, f"prompt: token ids must lie in [0, {vocabulary})", param="prompt")
        return list(prompt)

    def _params(
        self,
        request: ChatRequest | CompletionRequest,
        prompts: Sequence[list[int]],
        asked: int | None,
        episode: OpenEpisode,
        number: int,
    ) -> SamplingParams:
        """Sampling parameters, with the new-token budget checked against the limits and the context.
        A request that names no seed, in an episode opened with one, samples from the episode's seed
        and the request's number in it."""
        if asked is not None and asked > self.limits.max_tokens and self.limits.clamp_max_tokens:
            asked = self.limits.max_tokens
        if asked is not None and asked > self.limits.max_tokens:
            raise OpenAIError(400, f"max_tokens: at most {self.limits.max_tokens}", param="max_tokens")
        context = getattr(self.engine, "context_length", None)
        longest = max(len(ids) for ids in prompts)
        room = (context - longest) if context else self.limits.max_tokens
        if room < (asked or 1):
            message = (
                f"the prompt ({longest} tokens) and max_tokens ({asked or 1}) exceed the context ({context} tokens)"
            )
            raise OpenAIError(400, message, param="messages", code="context_length_exceeded")
        fixed = self.limits
        return SamplingParams(
            n=request.n,
            temperature=request.temperature if fixed.temperature is None else fixed.temperature,
            top_p=request.top_p if fixed.top_p is None else fixed.top_p,
            top_k=max(request.top_k, 0) if fixed.top_k is None else fixed.top_k,
            max_tokens=asked or min(self.limits.max_tokens, room),
            stop=request.stop_strings(),
            seed=request.seed if request.seed is not None or episode.seed is None else episode.seed + 1000 * number,
        )

    async def _sample(
        self, episode: OpenEpisode, prompts: list[list[int]], params: SamplingParams
    ) -> list[list[Sample]]:
        """Samples per prompt; an episode's single-prompt, single-choice requests share an engine
        session (the ``hf`` engine keeps its keys and values between turns)."""
        try:
            if episode.named and len(prompts) == 1 and params.n == 1 and getattr(self.engine, "keeps_sessions", False):
                grouped = await self.engine.agenerate(prompts, params, sessions=[session_key(episode.id)])
            else:
                grouped = await self.engine.agenerate(prompts, params)
        except Exception as exc:
            raise OpenAIError(500, f"generation failed: {type(exc).__name__}: {exc}") from exc
        failed = next((s for group in grouped for s in group if s.finish_reason == "error"), None)
        if failed is not None:
            raise OpenAIError(500, f"generation failed: {failed.error}")
        return grouped

    def _visible_text(self, sample: Sample, stop: Sequence[str]) -> str:
        """The text returned: without the end-of-sequence token's text, and cut before a stop string."""
        text = sample.text
        if sample.finish_reason == "eos" and sample.token_ids:
            text = text.removesuffix(self.tokenizer.decode(sample.token_ids[-1:], skip_special_tokens=False))
        if sample.finish_reason == "stop":
            text = text[: min((text.find(s) for s in stop if s in text), default=len(text))]
        return text

    def _token_texts(self, sample: Sample) -> list[str]:
        return self.tokenizer.batch_decode([[token] for token in sample.token_ids], skip_special_tokens=False)

    def _answer(
        self,
        prefix: str,
        kind: str,
        request: ChatRequest | CompletionRequest,
        choices: list[dict[str, Any]],
        prompts: Sequence[list[int]],
        samples: Sequence[Sample],
        token_ids: bool = True,
    ) -> dict[str, Any]:
        answer: dict[str, Any] = {
            "id": response_id(prefix),
            "object": kind,
            "created": now(),
            "model": request.model or self.model_name,
            "choices": choices,
            "usage": usage(sum(map(len, prompts)), sum(len(s.token_ids) for s in samples)),
        }
        if request.return_token_ids and token_ids:
            answer["prompt_token_ids"] = list(prompts[0])
        return answer


def session_key(episode_id: str) -> str:
    """The engine session an episode's calls share."""
    return f"gateway:{episode_id}"


def _completion_logprobs(tokens: list[str], logprobs: Sequence[float]) -> dict[str, Any]:
    offsets, at = [], 0
    for token in tokens:
        offsets.append(at)
        at += len(token)
    return {"tokens": tokens, "token_logprobs": list(logprobs), "top_logprobs": None, "text_offset": offsets}
