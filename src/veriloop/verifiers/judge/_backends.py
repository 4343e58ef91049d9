"""Judge backends: what sends a judge's prompts and brings back its replies.

A backend is built from a ``JudgeConfig`` by the factory registered under the config's
``backend`` name (``JUDGE_BACKENDS``) and answers many requests at once, in order, each with
the reply's text or a ``JudgeUnavailable`` (results are data: one failed request fails only its
own check). ``url`` lives here: an OpenAI-compatible ``/chat/completions`` endpoint, requests
sent concurrently. ``model`` (a local model directory served by a veriloop engine) is
registered by ``veriloop.rollout``, which owns the engines and sits above this layer; a process
that verifies with it imports ``veriloop.rollout`` (the CLI does when a task set needs it).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from veriloop.core import Registry
from veriloop.verifiers.judge._config import JudgeConfig

URL_CONCURRENCY = 8  # requests in flight at once to one url judge
_RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


@dataclass(frozen=True)
class JudgeRequest:
    """One prompt for the judge, with its sampling settings."""

    messages: tuple[dict[str, str], ...]
    temperature: float
    max_tokens: int


class JudgeUnavailable(Exception):
    """A request that brought back no reply; ``retry`` when another attempt may succeed."""

    def __init__(self, reason: str, retry: bool = True):
        super().__init__(reason)
        self.retry = retry


class JudgeBackend(Protocol):
    def complete(self, requests: Sequence[JudgeRequest]) -> list[str | JudgeUnavailable]:
        """Each request's reply text, or why there is none, in request order."""


JudgeBackendFactory = Callable[[JudgeConfig], JudgeBackend]

JUDGE_BACKENDS: Registry[JudgeBackendFactory] = Registry("judge backend")
"""backend name (``JudgeConfig.backend``: ``url`` or ``model``) -> ``factory(config) -> JudgeBackend``"""


def backend_for(config: JudgeConfig) -> JudgeBackend:
    """The backend that serves ``config``'s judge; ``JudgeUnavailable`` when none is registered."""
    if config.backend not in JUDGE_BACKENDS:
        raise JudgeUnavailable(
            f"no judge backend {config.backend!r} in this process: a judge 'model' is served by a veriloop "
            "engine, which importing veriloop.rollout registers",
            retry=False,
        )
    return JUDGE_BACKENDS.get(config.backend)(config)


def backend_identity(config: JudgeConfig) -> tuple[Any, ...]:
    """Configs with equal identities share one backend (and its batches)."""
    return (config.backend, config.model, config.url, config.served_model, config.api_key_env, config.timeout_s)


class UrlJudge:
    """A judge behind an OpenAI-compatible endpoint (vLLM, SGLang, hosted APIs)."""

    def __init__(self, url: str, served_model: str, api_key_env: str | None, timeout_s: float):
        self.url = url.rstrip("/")
        self.served_model = served_model
        self.api_key_env = api_key_env
        self.timeout_s = timeout_s

    def _headers(self) -> dict[str, str]:
        if self.api_key_env is None:
            return {}
        key = os.environ.get(self.api_key_env, "")
        if not key:
            raise JudgeUnavailable(f"the environment variable {self.api_key_env} (api_key_env) is not set", retry=False)
        return {"Authorization": f"Bearer {key}"}

    def complete(self, requests: Sequence[JudgeRequest]) -> list[str | JudgeUnavailable]:
        import httpx

        try:
            headers = self._headers()
        except JudgeUnavailable as exc:
            return [exc] * len(requests)
        with httpx.Client(base_url=self.url, headers=headers, timeout=self.timeout_s) as client:
            with ThreadPoolExecutor(max_workers=min(URL_CONCURRENCY, max(1, len(requests)))) as pool:
                return list(pool.map(lambda request: self._one(client, request), requests))

    def _one(self, client: Any, request: JudgeRequest) -> str | JudgeUnavailable:
        import httpx

        body = {
            "model": self.served_model,
            "messages": list(request.messages),
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
            "n": 1,
        }
        try:
            response = client.post("/chat/completions", json=body)
        except httpx.TimeoutException:
            return JudgeUnavailable(f"no answer from {self.url} within {self.timeout_s:g} s")
        except httpx.HTTPError as exc:
            return JudgeUnavailable(f"{type(exc).__name__}: {exc}")
        if response.status_code != 200:
            retry = response.status_code in _RETRY_STATUS
            return JudgeUnavailable(f"HTTP {response.status_code}: {response.text[:200]}", retry=retry)
        try:
            content = response.json()["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            return JudgeUnavailable(f"not a chat completion: {response.text[:200]!r}")
        if not isinstance(content, str):
            return JudgeUnavailable(f"the reply's content is not text: {content!r}"[:200])
        return content


@JUDGE_BACKENDS.register("url")
def url_judge(config: JudgeConfig) -> JudgeBackend:
    """The judge at ``config.url`` (the config's validator made sure it names ``served_model``)."""
    return UrlJudge(str(config.url), str(config.served_model), config.api_key_env, config.timeout_s)
