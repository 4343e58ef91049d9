"""The ``openai`` engine: any OpenAI-compatible chat endpoint (vLLM, SGLang, Ollama, hosted APIs).

Text-level: prompts are chat messages, samples carry text (and log-probs when the server
returns them) but no token ids, so this engine is for evaluation, not training. Requests run
concurrently up to ``concurrency``; a timeout, a dropped connection, 429 or a 5xx answer is
retried with exponential backoff, and a request that still fails becomes a sample with
``finish_reason="error"`` instead of failing the batch.
"""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import Sequence
from typing import Any

from veriloop.core import UserError
from veriloop.rollout._engine import ENGINES, Prompt
from veriloop.rollout._sampling import Sample, SamplingParams

_RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
_FINISH = {"stop": "eos", "length": "length"}


def parse_endpoint(spec: str) -> tuple[str, str]:
    """``openai:MODEL@URL`` -> (model, base_url)."""
    body = spec.removeprefix("openai:")
    model, sep, url = body.rpartition("@")
    if not sep or not model or not url.startswith(("http://", "https://")):
        raise UserError(f"{spec!r}: expected openai:MODEL@http(s)://HOST[:PORT]/v1")
    return model, url.rstrip("/")


class OpenAIEngine:
    name = "openai"
    tokenizer = None

    def __init__(
        self,
        model: str,
        base_url: str,
        api_key_env: str = "OPENAI_API_KEY",
        concurrency: int = 16,
        timeout_s: float = 120.0,
        max_retries: int = 4,
        backoff_s: float = 0.5,
    ):
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.api_key = os.environ.get(api_key_env, "")
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.policy_version = 0

    def generate(self, prompts: Sequence[Prompt], params: SamplingParams) -> list[list[Sample]]:
        return asyncio.run(self.agenerate(prompts, params))

    async def agenerate(self, prompts: Sequence[Prompt], params: SamplingParams) -> list[list[Sample]]:
        import httpx

        limit = asyncio.Semaphore(self.concurrency)
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        async with httpx.AsyncClient(base_url=self.base_url, headers=headers, timeout=self.timeout_s) as client:
            return list(await asyncio.gather(*(self._one(client, limit, p, params) for p in prompts)))

    async def _one(self, client: Any, limit: asyncio.Semaphore, prompt: Prompt, params: SamplingParams) -> list[Sample]:
        if not prompt or not isinstance(prompt[0], dict):
            raise UserError("the openai engine takes chat messages, not token ids")
        body: dict[str, Any] = {
            "model": self.model,
            "messages": list(prompt),
            "n": params.n,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_tokens": params.max_tokens,
            "logprobs": True,
        }
        if params.top_k:
            body["top_k"] = params.top_k  # not in OpenAI's API; vLLM and SGLang servers read it
        if params.stop:
            body["stop"] = list(params.stop)
        if params.seed is not None:
            body["seed"] = params.seed
        async with limit:
            payload, error = await self._post_with_retries(client, body)
        if payload is None:
            return [Sample(text="", token_ids=(), logprobs=(), finish_reason="error", error=error)] * params.n
        samples = [_sample_from_choice(choice, payload) for choice in payload.get("choices", [])][: params.n]
        if 0 < len(samples) < params.n:  # a server that ignores n: the rest one request each
            singles = [self._single(client, limit, body, index) for index in range(len(samples), params.n)]
            samples += await asyncio.gather(*singles)
        samples += [Sample("", (), (), "error", error="server returned no choices")] * (params.n - len(samples))
        return samples

    async def _single(self, client: Any, limit: asyncio.Semaphore, body: dict[str, Any], index: int) -> Sample:
        """Sample ``index`` of a request, asked for alone (its own seed when the request had one)."""
        alone = {**body, "n": 1}
        if "seed" in body:
            alone["seed"] = body["seed"] + index
        async with limit:
            payload, error = await self._post_with_retries(client, alone)
        choices = (payload or {}).get("choices") or []
        if not choices:
            return Sample("", (), (), "error", error=error or "server returned no choices")
        return _sample_from_choice(choices[0], payload)

    async def _post_with_retries(self, client: Any, body: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
        import httpx

        error = ""
        for attempt in range(self.max_retries + 1):
            if attempt:
                await asyncio.sleep(self.backoff_s * 2 ** (attempt - 1) * (0.5 + random.random()))
            try:
                response = await client.post("/chat/completions", json=body)
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                error = f"{type(exc).__name__}: {exc}"
                continue
            if response.status_code == 200:
                return response.json(), ""
            error = f"HTTP {response.status_code}: {response.text[:200]}"
            if response.status_code not in _RETRY_STATUS:
                break
        return None, error

    def update_weights(self, state_dict: dict[str, Any] | None, version: int) -> None:
        if state_dict is not None:
            raise NotImplementedError("a served model's weights are updated by its server")
        self.policy_version = version

    def close(self) -> None:
        pass


def _sample_from_choice(choice: dict[str, Any], payload: dict[str, Any]) -> Sample:
    """A choice as a Sample; its token count is its log-probs' length, or the response's usage
    when it is the response's only choice."""
    text = (choice.get("message") or {}).get("content") or ""
    content = (choice.get("logprobs") or {}).get("content") or []
    logprobs = tuple(float(item["logprob"]) for item in content if "logprob" in item)
    counted = len(content)
    usage = (payload.get("usage") or {}).get("completion_tokens")
    if not counted and len(payload.get("choices") or ()) == 1 and isinstance(usage, int) and usage > 0:
        counted = usage
    finish = _FINISH.get(choice.get("finish_reason"), "stop")
    return Sample(text=text, token_ids=(), logprobs=logprobs, finish_reason=finish, counted_tokens=counted)


ENGINES.add("openai", OpenAIEngine)
