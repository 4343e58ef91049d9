"""The sandbox as an HTTP service: SandboxFusion's ``POST /run_code`` and our ``POST /v1/exec``.

Guards, outermost first: a request body over the cap is refused (413) before anything reads
it; with a token, every request needs ``Authorization: Bearer <token>``, or HTTP Basic with the
token as the password (any user name), which a URL can carry for clients that take only a URL
(``http://veriloop:TOKEN@host:port``, as SandboxFusion's client and verl's sandbox reward do) (401); without one,
only loopback clients are answered (403). At most ``workers`` runs go at once and at most
``max_pending`` requests wait (503 beyond). The service's Limits are a ceiling: a request may
ask for less time or memory, never more.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable
from typing import Any

from veriloop.core import BodyTooLarge, ExecResult, UserError, read_body, replaying
from veriloop.sandbox._fusion import RunCodeRequest, RunCodeResponse, fusion_response
from veriloop.sandbox._job import Job, make_job
from veriloop.sandbox._languages import LANGUAGES, run_code
from veriloop.sandbox._limits import Limits
from veriloop.sandbox._sandbox import Sandbox

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


def is_loopback(host: str | None) -> bool:
    """Whether ``host`` (an address, or "localhost") is this machine's loopback."""
    if host is None:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def capped(requested: Limits, ceiling: Limits) -> Limits:
    """``requested`` with every limit lowered to at most ``ceiling``'s.

    CPU time is compared as the budgets in force (``cpu_limit_s``): an unset ``cpu_s`` means
    the run's wall limit, so a ceiling without one still bounds CPU time by its own wall limit.
    """
    fields = {}
    for name in Limits.model_fields:
        asked, most = getattr(requested, name), getattr(ceiling, name)
        fields[name] = most if asked is None else asked if most is None else min(asked, most)
    if requested.cpu_s is not None or ceiling.cpu_s is not None:
        fields["cpu_s"] = min(requested.cpu_limit_s, ceiling.cpu_limit_s)
    return Limits(**fields)


class Guard:
    """ASGI middleware: body size cap, then bearer token or loopback-only."""

    def __init__(self, app: Callable[..., Awaitable[None]], token: str | None, max_body_bytes: int):
        self.app = app
        self.token = token.encode() if token else None
        self.expected = f"Bearer {token}".encode() if token else None
        self.max_body_bytes = max_body_bytes

    def _authorized(self, header: bytes) -> bool:
        """The bearer token, or Basic credentials whose password is the token."""
        if header[:6].lower() == b"basic ":
            try:
                _, _, password = base64.b64decode(header[6:].strip(), validate=True).partition(b":")
            except (binascii.Error, ValueError):
                return False
            return hmac.compare_digest(password, self.token or b"")
        return hmac.compare_digest(header, self.expected or b"")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        if self.expected is not None:
            if not self._authorized(headers.get(b"authorization", b"")):
                return await _answer(send, 401, "missing or wrong bearer token", [(b"www-authenticate", b"Bearer")])
        elif not is_loopback((scope.get("client") or (None,))[0]):
            return await _answer(send, 403, "this service answers loopback clients only (start it with --token)")
        declared = headers.get(b"content-length", b"0")
        if not declared.isdigit():
            return await _answer(send, 400, "bad Content-Length")
        if int(declared) > self.max_body_bytes:
            return await _answer(send, 413, f"request body over {self.max_body_bytes} bytes")
        try:
            body = await read_body(receive, self.max_body_bytes)
        except BodyTooLarge as exc:
            return await _answer(send, 413, str(exc))
        if body is None:
            return
        await self.app(scope, replaying(body, receive), send)


async def _answer(send: Send, status: int, detail: str, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps({"detail": detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers + (extra or [])})
    await send({"type": "http.response.body", "body": body})


def create_app(
    sandbox: Sandbox, *, token: str | None = None, max_body_bytes: int = 16 << 20, max_pending: int = 64
) -> Any:
    """The ASGI app serving ``sandbox`` (FastAPI inside ``Guard``)."""
    from fastapi import FastAPI, HTTPException

    api = FastAPI(title="veriloop sandbox", docs_url=None, redoc_url=None, openapi_url=None)
    running = asyncio.Semaphore(sandbox.workers)
    waiting = 0

    async def bounded(call: Callable[[], Any]) -> Any:
        nonlocal waiting
        if waiting >= max_pending + sandbox.workers:
            raise HTTPException(503, "too many requests waiting; retry later")
        waiting += 1
        try:
            async with running:
                return await asyncio.to_thread(call)
        finally:
            waiting -= 1

    @api.get("/v1/ping")
    async def ping() -> str:
        return "pong"

    @api.post("/v1/exec")
    async def execute(job: Job) -> ExecResult:
        try:
            job = Job.model_validate({**dict(job), "limits": capped(job.limits, sandbox.limits)})
        except ValueError as exc:  # the files no longer fit under this service's disk limit
            raise HTTPException(422, str(exc)) from None
        return await bounded(lambda: sandbox.execute(job))

    @api.post("/run_code")
    async def fusion_run_code(request: RunCodeRequest) -> RunCodeResponse:
        if request.language not in LANGUAGES:
            raise HTTPException(400, f"unknown language {request.language!r}; known: {', '.join(LANGUAGES)}")
        try:
            files = request.decoded_files()
            memory = request.memory_limit_MB if request.memory_limit_MB > 0 else sandbox.limits.memory_mb
            asked = sandbox.limits.model_copy(
                update={"timeout_s": request.run_timeout, "cpu_s": None, "memory_mb": memory}
            )
            limits = capped(asked, sandbox.limits)
            make_job("python", files=files, limits=limits)  # checks names and sizes
        except (ValueError, UserError) as exc:
            raise HTTPException(400, str(exc)) from None
        try:
            outcome = await bounded(
                lambda: run_code(
                    sandbox,
                    request.language,
                    request.code,
                    stdin=request.stdin,
                    files=files,
                    limits=limits,
                    build_timeout_s=min(request.compile_timeout, 60.0),
                    fetch=request.fetch_files,
                )
            )
        except UserError as exc:
            return RunCodeResponse(status="SandboxError", message=str(exc))
        return fusion_response(outcome)

    return Guard(api, token, max_body_bytes)
