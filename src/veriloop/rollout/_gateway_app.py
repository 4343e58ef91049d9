"""The gateway's HTTP application: its routes, and the guard every request passes first.

Routes (each also under ``/episodes/{id}``, which names the episode as the header does):
``POST /v1/chat/completions``, ``POST /v1/completions``, ``GET /v1/models``,
``GET /v1/models/{model}``, ``POST /v1/episodes/{id}/finish``. A request names its episode
by the ``X-Episode-Id`` header or that path prefix; one that names none is an episode of
its own, finished once its answer is sent. Every answer carries ``X-Episode-Id``.

The guard, outermost first: with a token, every request needs ``Authorization: Bearer
<token>`` (401); without one, only loopback clients are answered (403); a body over the cap
is refused before it is read whole (413). Every error is OpenAI's shape.
"""

# No ``from __future__ import annotations``: FastAPI reads the routes' ``Request`` annotations at
# definition time, inside ``create_gateway_app``, where fastapi is imported (lazily).
import hmac
import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import ValidationError

from veriloop.core import BodyTooLarge, read_body, replaying
from veriloop.rollout._gateway_calls import GatewayCalls
from veriloop.rollout._gateway_episodes import EpisodeBook
from veriloop.rollout._gateway_protocol import (
    ChatRequest,
    CompletionRequest,
    OpenAIError,
    chat_chunks,
    completion_chunks,
    now,
    validation_error,
)
from veriloop.sandbox import is_loopback

EPISODE_HEADER = "x-episode-id"
EPISODE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}\Z")
_EPISODE_SCOPE_KEY = "veriloop.episode"

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


def create_gateway_app(calls: GatewayCalls, book: EpisodeBook, *, token: str | None, max_body_bytes: int) -> Any:
    """The ASGI application: FastAPI routes inside ``_Guard``."""
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse, StreamingResponse
    from starlette.background import BackgroundTask
    from starlette.exceptions import HTTPException

    api = FastAPI(title="veriloop gateway", docs_url=None, redoc_url=None, openapi_url=None)
    started = now()

    @api.exception_handler(OpenAIError)
    async def openai_error(request: Request, exc: OpenAIError) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=exc.status)

    @api.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        error = OpenAIError(exc.status_code, str(exc.detail), code="not_found" if exc.status_code == 404 else None)
        return JSONResponse(error.body(), status_code=exc.status_code)

    def model_card() -> dict[str, Any]:
        return {"id": calls.model_name, "object": "model", "created": started, "owned_by": "veriloop"}

    @api.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [model_card()]}

    @api.get("/v1/models/{model:path}")
    async def model(model: str) -> dict[str, Any]:
        if model != calls.model_name:
            raise OpenAIError(
                404, f"model {model!r} is not served here ({calls.model_name!r} is)", code="model_not_found"
            )
        return model_card()

    async def answer(request: Request, kind: type[ChatRequest] | type[CompletionRequest]) -> Any:
        parsed = _parse(kind, await request.body())
        episode, number = book.begin(_episode_id(request))
        recorded: list[Any] = []
        try:
            if isinstance(parsed, ChatRequest):
                body, recorded = await calls.chat(parsed, episode, number)
            else:
                body, recorded = await calls.complete(parsed, episode, number)
        finally:
            book.end(episode, recorded)
        headers = {"X-Episode-Id": episode.id}
        done = None if episode.named else BackgroundTask(_finish_anonymous, book, episode)
        if not parsed.stream:
            return JSONResponse(body, headers=headers, background=done)
        chunks = (chat_chunks if isinstance(parsed, ChatRequest) else completion_chunks)(body, parsed.include_usage())
        events = [f"data: {json.dumps(chunk)}\n\n" for chunk in chunks] + ["data: [DONE]\n\n"]
        return StreamingResponse(iter(events), media_type="text/event-stream", headers=headers, background=done)

    @api.post("/v1/chat/completions")
    async def chat(request: Request) -> Any:
        return await answer(request, ChatRequest)

    @api.post("/v1/completions")
    async def complete(request: Request) -> Any:
        return await answer(request, CompletionRequest)

    @api.post("/v1/episodes/{episode_id}/finish")
    async def finish(episode_id: str) -> dict[str, Any]:
        try:
            finished = book.finish(episode_id, hold=True)
        except ValueError as exc:
            raise OpenAIError(409, f"{exc}; finish it once they are answered", code="episode_busy") from None
        if finished is None:
            raise OpenAIError(404, f"no episode {episode_id!r} is open", param="episode_id", code="episode_not_found")
        requests = len({call.request for call in finished.calls})
        return {"id": finished.id, "object": "episode", "requests": requests, "calls": len(finished.calls)}

    return _Guard(api, token, max_body_bytes)


async def _finish_anonymous(book: EpisodeBook, episode: Any) -> None:
    """Once its answer is sent, on the event loop (a synchronous task would take a worker thread)."""
    book.finish_anonymous(episode)


def _parse(kind: type[ChatRequest] | type[CompletionRequest], body: bytes) -> ChatRequest | CompletionRequest:
    try:
        value = json.loads(body)
    except ValueError as exc:
        raise OpenAIError(400, f"the body is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise OpenAIError(400, "the body must be a JSON object")
    try:
        return kind.model_validate(value)
    except ValidationError as exc:
        raise validation_error(exc) from None


def _episode_id(request: Any) -> str | None:
    """The episode a request names by its path prefix or header (both: they must agree)."""
    from_path = request.scope.get(_EPISODE_SCOPE_KEY)
    from_header = request.headers.get(EPISODE_HEADER)
    if from_header is not None and not EPISODE_ID.match(from_header):
        raise OpenAIError(
            400, f"X-Episode-Id {from_header[:140]!r}: use 1-128 letters, digits and ._:@-", "X-Episode-Id"
        )
    if from_path is not None and from_header is not None and from_path != from_header:
        raise OpenAIError(400, f"the path names episode {from_path!r}, the X-Episode-Id header {from_header!r}")
    return from_path or from_header


class _Guard:
    """ASGI middleware: token or loopback-only, body size cap, and the ``/episodes/{id}`` prefix."""

    def __init__(self, app: Callable[..., Awaitable[None]], token: str | None, max_body_bytes: int):
        self.app = app
        self.expected = f"Bearer {token}".encode() if token else None
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        if self.expected is not None:
            if not hmac.compare_digest(headers.get(b"authorization", b""), self.expected):
                error = OpenAIError(401, "missing or wrong bearer token", code="invalid_api_key")
                return await _refuse(send, error, [(b"www-authenticate", b"Bearer")])
        elif not is_loopback((scope.get("client") or (None,))[0]):
            return await _refuse(
                send, OpenAIError(403, "this gateway answers loopback clients only (start it with a token)")
            )
        declared = headers.get(b"content-length", b"0")
        if not declared.isdigit():
            return await _refuse(send, OpenAIError(400, "bad Content-Length"))
        too_large = OpenAIError(413, f"request body over {self.max_body_bytes} bytes", code="request_too_large")
        if int(declared) > self.max_body_bytes:
            return await _refuse(send, too_large)
        try:
            body = await read_body(receive, self.max_body_bytes)
        except BodyTooLarge:
            return await _refuse(send, too_large)
        if body is None:
            return
        scope = _episode_prefix(scope)
        if scope is None:
            return await _refuse(
                send, OpenAIError(400, "the episode id in the path: use 1-128 letters, digits and ._:@-")
            )
        await self.app(scope, replaying(body, receive), send)


def _episode_prefix(scope: Scope) -> Scope | None:
    """``/episodes/{id}/v1/...`` as ``/v1/...`` with the episode id in the scope; None for a bad id."""
    path: str = scope["path"]
    if not path.startswith("/episodes/"):
        return scope
    _, _, episode_id, rest = (path.split("/", 3) + [""])[:4]
    if not rest.startswith("v1"):
        return scope  # not a gateway route: 404
    if not EPISODE_ID.match(episode_id):
        return None
    inner = "/" + rest
    return {**scope, "path": inner, "raw_path": inner.encode(), _EPISODE_SCOPE_KEY: episode_id}


async def _refuse(send: Send, error: OpenAIError, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps(error.body()).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": error.status, "headers": headers + (extra or [])})
    await send({"type": "http.response.body", "body": body})
