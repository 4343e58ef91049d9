"""A small OpenEnv environment served on loopback, speaking openenv-core's protocol exactly.

``guess``: the environment hides a number from 0 to 9 (``seed % 10`` at reset, or ``target``);
the action is ``{"guess": int}``; each wrong guess observes ``higher`` or ``lower`` (``text``, with ``misses_left``) with reward
0; the right one ends the episode with reward 1; the fifth wrong one ends it with reward 0. An
action without an integer ``guess`` is refused with ``VALIDATION_ERROR``, as openenv-core's
server refuses an action its model does not validate; an exception while stepping is answered
with ``EXECUTION_ERROR``, as openenv-core answers it. Sessions run over ``/ws`` (one
environment per connection); ``/health``, ``/metadata`` and ``/schema`` answer over plain HTTP.
``GuessServer`` serves it on loopback TCP, ``GuessUnixServer`` on a Unix socket.

Two deliberately weak variants, for the audit to catch (``GuessServer(environment=...)``):
``TrustingGuessEnvironment`` takes an action's word for its own outcome (its ``reward`` and
``done`` fields, or its ``metadata``'s), and ``FragileGuessEnvironment`` validates nothing and
reads the guess as a float, so a wrong type or a huge number fails the step.
"""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import socketserver
import struct
import threading
from typing import Any

_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
ACTION_SCHEMA = {
    "additionalProperties": False,
    "properties": {
        "metadata": {"additionalProperties": True, "title": "Metadata", "type": "object"},
        "guess": {"title": "Guess", "type": "integer", "description": "the number you guess"},
    },
    "required": ["guess"],
    "title": "GuessAction",
    "type": "object",
}
PAGES = {
    "/health": {"status": "healthy"},
    "/metadata": {"name": "guess", "description": "Find the hidden number from 0 to 9.", "version": "1.0.0"},
    "/schema": {"action": ACTION_SCHEMA, "observation": {}, "state": {}},
}


class GuessEnvironment:
    def __init__(self) -> None:
        self.target, self.steps, self.misses = 0, 0, 0

    def reset(self, seed: int | None = None, target: int | None = None) -> dict[str, Any]:
        self.target = target if target is not None else (seed or 0) % 10
        self.steps = self.misses = 0
        return {"observation": {"text": "Guess a number from 0 to 9.", "misses_left": 5}, "reward": None, "done": False}

    def refusal(self, action: dict[str, Any]) -> str | None:
        """Why the action does not validate, or None."""
        guess = action.get("guess")
        return (
            None if isinstance(guess, int) and not isinstance(guess, bool) else "guess: Input should be a valid integer"
        )

    def step(self, action: dict[str, Any]) -> dict[str, Any]:
        self.steps += 1
        guess = action["guess"]
        if guess == self.target:
            return {"observation": {"text": "correct", "misses_left": 5 - self.misses}, "reward": 1.0, "done": True}
        self.misses += 1
        hint = "higher" if guess < self.target else "lower"
        observation = {"text": hint, "misses_left": 5 - self.misses}
        return {"observation": observation, "reward": 0.0, "done": self.misses >= 5}


class TrustingGuessEnvironment(GuessEnvironment):
    """Weak: the step's ``reward`` and ``done`` are the action's own when it gives them."""

    def step(self, action: dict[str, Any]) -> dict[str, Any]:
        result = super().step(action)
        metadata = action.get("metadata") if isinstance(action.get("metadata"), dict) else {}
        for claims in (metadata, action):
            result.update({key: claims[key] for key in ("reward", "done") if key in claims})
        return result


class FragileGuessEnvironment(GuessEnvironment):
    """Weak: nothing is validated; the guess is read with ``float``, which raises on a wrong type
    and on an integer too large for a float."""

    def refusal(self, action: dict[str, Any]) -> str | None:
        return None

    def step(self, action: dict[str, Any]) -> dict[str, Any]:
        try:
            guess = float(action["guess"])
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise RuntimeError(f"cannot read the guess {action.get('guess')}: {type(exc).__name__}") from None
        return super().step({"guess": guess})


def _error(message: str, code: str) -> dict[str, Any]:
    return {"type": "error", "data": {"message": message, "code": code}}


def answer(env: GuessEnvironment, message: dict[str, Any]) -> dict[str, Any] | None:
    """The server's answer to one client message (None: close the session)."""
    kind, data = message.get("type"), message.get("data", {})
    if kind == "reset":
        return {"type": "observation", "data": env.reset(**{k: data[k] for k in ("seed", "target") if k in data})}
    if kind == "step":
        refusal = env.refusal(data) if isinstance(data, dict) else "the action is not an object"
        if refusal is not None:
            return _error(refusal, "VALIDATION_ERROR")
        try:
            return {"type": "observation", "data": env.step(data)}
        except Exception as exc:
            return _error(str(exc), "EXECUTION_ERROR")
    if kind == "state":
        return {"type": "state", "data": {"episode_id": None, "step_count": env.steps}}
    if kind == "close":
        return None
    return _error(f"Unknown message type: {kind}", "UNKNOWN_TYPE")


class _Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.request.recv(4096)
            if not chunk:
                return
            head += chunk
        lines = head.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
        path = lines[0].split(" ")[1]
        headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:] if ":" in line)}
        if path in PAGES:
            body = json.dumps(PAGES[path]).encode()
            self.request.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body
            )
            return
        if path != "/ws" or headers.get("upgrade", "").lower() != "websocket":
            self.request.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
            return
        accept = base64.b64encode(hashlib.sha1((headers["sec-websocket-key"] + _GUID).encode()).digest()).decode()
        self.request.sendall(
            f"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Accept: {accept}\r\n\r\n".encode()
        )
        self.server.sessions += 1  # type: ignore[attr-defined]
        env = self.server.environment()  # type: ignore[attr-defined]
        while True:
            text = self._receive()
            if text is None:
                return
            try:
                message = json.loads(text)
            except (ValueError, RecursionError):
                message = None
            reply = answer(env, message) if isinstance(message, dict) else _error("Invalid JSON", "INVALID_JSON")
            if reply is None:
                return
            self._send(json.dumps(reply))

    def _read(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = self.request.recv(size - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data

    def _receive(self) -> str | None:
        try:
            first, second = self._read(2)
            size = second & 0x7F
            if size == 126:
                size = struct.unpack("!H", self._read(2))[0]
            elif size == 127:
                size = struct.unpack("!Q", self._read(8))[0]
            mask = self._read(4)
            payload = bytes(b ^ mask[i % 4] for i, b in enumerate(self._read(size)))
        except (ConnectionError, OSError):
            return None
        return None if first & 0x0F == 0x8 else payload.decode()

    def _send(self, text: str) -> None:
        payload = text.encode()
        size = len(payload)
        if size < 126:
            header = bytes([0x81, size])
        elif size < 65536:
            header = bytes([0x81, 126]) + struct.pack("!H", size)
        else:
            header = bytes([0x81, 127]) + struct.pack("!Q", size)
        self.request.sendall(header + payload)


class GuessServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, environment: type[GuessEnvironment] = GuessEnvironment) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.sessions = 0
        self.environment = environment

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self) -> GuessServer:
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()


class GuessUnixServer(socketserver.ThreadingUnixStreamServer):
    """The same environment on the Unix socket at ``path``; its ``url`` is ``unix://PATH``."""

    daemon_threads = True

    def __init__(self, path: str) -> None:
        super().__init__(path, _Handler)
        self.sessions = 0
        self.environment = GuessEnvironment

    @property
    def url(self) -> str:
        return f"unix://{self.server_address}"

    __enter__ = GuessServer.__enter__
    __exit__ = GuessServer.__exit__


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
