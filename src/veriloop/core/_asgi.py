"""A request body read whole before an ASGI app sees it: the guards in front of veriloop's
servers (the sandbox service, the gateway) read it once, bounded, then hand it on."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

Receive = Callable[[], Awaitable[dict[str, Any]]]


class BodyTooLarge(Exception):
    """The request's body is over the bound it was read with."""


async def read_body(receive: Receive, max_bytes: int) -> bytes | None:
    """The request's whole body from ``receive``; None when the client left first.
    BodyTooLarge as soon as more than ``max_bytes`` have come."""
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        body += message.get("body", b"")
        if len(body) > max_bytes:
            raise BodyTooLarge(f"request body over {max_bytes} bytes")
        if not message.get("more_body"):
            return bytes(body)


def replaying(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives ``body`` once, as one message, then hands on to ``receive``."""
    replayed = False

    async def replay() -> dict[str, Any]:
        nonlocal replayed
        if replayed:
            return await receive()
        replayed = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay
