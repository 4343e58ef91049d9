"""The review web application (FastAPI): queue, review screen, agreement figures, judgments API.

Routes: ``GET /`` (the queue), ``GET /review/{position}`` (one sample), ``GET /stats`` and
``GET /api/stats`` (agreement figures as HTML and JSON), ``POST /api/judgments`` (save one
judgment), ``GET /static/{name}`` (the stylesheet and script shipped in ``static/``). Nothing is
fetched from anywhere else, and the Content-Security-Policy allows no inline script.

Access, as the sandbox service does it: with a token every request needs it, as
``Authorization: Bearer TOKEN``, as the ``veriloop_review`` cookie, or once as ``?token=TOKEN``
(which sets the cookie, so a browser can open the link it was given); anything else gets 401.
Without a token only loopback clients are answered (403).
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Awaitable, Callable, Sequence
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from pydantic import BaseModel, Field

from veriloop.evaluation import JudgmentStore, Verdict, agreement
from veriloop.review._pages import queue_page, review_page, stats_page
from veriloop.review._sampler import QueueItem
from veriloop.sandbox import is_loopback

STATIC = Path(__file__).with_name("static")
STATIC_TYPES = {"review.js": "text/javascript; charset=utf-8", "review.css": "text/css; charset=utf-8"}
COOKIE = "veriloop_review"
SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src data:",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]

Scope = dict[str, Any]
ASGI = Callable[[Scope, Callable[..., Awaitable[Any]], Callable[..., Awaitable[Any]]], Awaitable[None]]


class JudgmentIn(BaseModel):
    """What the page sends for one judgment."""

    position: int = Field(ge=0)
    verdict: Verdict
    note: str = Field(default="", max_length=4000)
    reviewer: str = Field(min_length=1, max_length=80)


class AccessGuard:
    """ASGI middleware: the token (header, cookie or one ``?token=``) or loopback only; and the
    security headers on every answer."""

    def __init__(self, app: ASGI, token: str | None):
        self.app = app
        self.token = token.encode() if token else None

    def _presented(self, scope: Scope) -> tuple[bytes, bool]:
        """The token the request carries, and whether it came in the query string."""
        headers = dict(scope.get("headers") or [])
        authorization = headers.get(b"authorization", b"")
        if authorization[:7].lower() == b"bearer ":
            return authorization[7:].strip(), False
        cookies = SimpleCookie(headers.get(b"cookie", b"").decode("latin-1"))
        if COOKIE in cookies:
            return cookies[COOKIE].value.encode(), False
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        return (query["token"][0].encode(), True) if "token" in query else (b"", False)

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        from_query = False
        if self.token is not None:
            presented, from_query = self._presented(scope)
            if not hmac.compare_digest(presented, self.token):
                return await _refuse(send, 401, b"missing or wrong token (open the link with ?token=TOKEN)")
        elif not is_loopback((scope.get("client") or (None,))[0]):
            return await _refuse(send, 403, b"this review server answers loopback clients only (start it with --token)")

        async def with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                extra = list(SECURITY_HEADERS)
                if from_query:
                    extra.append(
                        (b"set-cookie", f"{COOKIE}={self.token.decode()}; HttpOnly; SameSite=Strict; Path=/".encode())
                    )
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, with_headers)


async def _refuse(send: Any, status: int, detail: bytes) -> None:
    headers = [(b"content-type", b"text/plain; charset=utf-8"), *SECURITY_HEADERS]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": detail + b"\n"})


def create_review_app(
    queue: Sequence[QueueItem],
    registry: str | os.PathLike[str],
    *,
    token: str | None = None,
    default_reviewer: str = "",
    description: str = "",
) -> Any:
    """The ASGI application over ``queue``; judgments go to the run registry file ``registry``."""
    from fastapi import FastAPI, HTTPException
    from fastapi.responses import HTMLResponse, JSONResponse, Response

    store = JudgmentStore(registry)
    runs = sorted({item.sample.run for item in queue})
    api = FastAPI(title="veriloop review", docs_url=None, redoc_url=None, openapi_url=None)

    def item_at(position: int) -> QueueItem:
        if not 0 <= position < len(queue):
            raise HTTPException(404, f"no sample {position} in a queue of {len(queue)}")
        return queue[position]

    @api.get("/", response_class=HTMLResponse)
    def show_queue() -> str:
        judged = {f"{j.run}::{j.sample_id}": j for j in store.all(runs)}  # the newest judgment of each sample
        return queue_page(queue, judged, description, reviewer=default_reviewer)

    @api.get("/review/{position}", response_class=HTMLResponse)
    def show_sample(position: int) -> str:
        item = item_at(position)
        history = [j for j in store.all([item.sample.run]) if j.sample_id == item.sample.sample_id]
        return review_page(item, len(queue), history, reviewer=default_reviewer)

    @api.post("/api/judgments")
    def save(judgment: JudgmentIn) -> dict[str, Any]:
        sample = item_at(judgment.position).sample
        reviewer = judgment.reviewer.strip() or "anonymous"
        saved = store.save(sample.judgment(judgment.verdict, judgment.note, reviewer))
        return {
            "saved": saved.judgment_id,
            "created_at": saved.created_at,
            "next": min(judgment.position + 1, len(queue) - 1),
        }

    @api.get("/stats", response_class=HTMLResponse)
    def show_stats() -> str:
        return stats_page(agreement(store.latest(runs)), reviewer=default_reviewer)

    @api.get("/api/stats")
    def stats_json() -> JSONResponse:
        return JSONResponse(agreement(store.latest(runs)).model_dump(mode="json"))

    @api.get("/static/{name}")
    def static(name: str) -> Response:
        if name not in STATIC_TYPES:
            raise HTTPException(404, "no such file")
        return Response((STATIC / name).read_bytes(), media_type=STATIC_TYPES[name])

    return AccessGuard(api, token)
