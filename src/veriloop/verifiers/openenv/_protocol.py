"""The client side of OpenEnv's session protocol, on the standard library alone.

An OpenEnv environment is a server (openenv-core's ``HTTPEnvServer``). Its HTTP ``/reset`` and
``/step`` make a fresh environment per request, so an episode runs over the WebSocket ``/ws``:
each connection owns one environment instance. The client sends JSON text frames
``{"type": "reset", "data": {...}}``, ``{"type": "step", "data": ACTION}``, ``{"type": "state"}``
and ``{"type": "close"}``; the server answers ``{"type": "observation", "data": {"observation":
{...}, "reward": float | null, "done": bool}}``, ``{"type": "state", "data": {...}}`` or
``{"type": "error", "data": {"message": ..., "code": ...}}``.

openenv-core needs not be importable here (its requirements clash with this package's): the
framing of RFC 6455 that the protocol needs (masked text frames out, text, ping and close frames
in, no extensions) is written out below. ``OpenEnvError`` is any failure of the environment or
of the connection, never of the model: callers turn it into an infra error.

An address is ``http://HOST:PORT`` (``https``, ``ws`` and ``wss`` alike) or ``unix:///PATH``: a
server listening on the Unix socket at ``PATH`` (as ``uvicorn --uds PATH`` does), the way to a
server in the sandbox, which has no network.
"""

from __future__ import annotations

import base64
import json
import math
import os
import re
import socket
import ssl
import struct
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

_TEXT, _CLOSE, _PING, _PONG = 0x1, 0x8, 0x9, 0xA
MAX_MESSAGE_BYTES = 16 << 20
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def utf8_safe(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD. JSON's ``\\ud800`` escapes carry
    code points that UTF-8 cannot encode: an environment may send them back (echoing an action,
    say), and text holding one can be neither written, printed nor tokenised."""
    return _LONE_SURROGATE.sub("\ufffd", text)


class OpenEnvError(Exception):
    """The environment could not be reached, broke the protocol, or reported an error (then
    ``code`` is the protocol's error code, e.g. ``VALIDATION_ERROR``, and ``detail`` its message)."""

    def __init__(self, message: str, code: str | None = None, detail: str = ""):
        super().__init__(message)
        self.code = code
        self.detail = detail


@dataclass(frozen=True)
class StepResult:
    """One answer of the environment: the observation's fields (``reward``, ``done`` and
    ``metadata`` apart, as openenv-core serialises them), its reward (None: none given) and
    whether the episode ended."""

    observation: dict[str, Any] = field(default_factory=dict)
    reward: float | None = None
    done: bool = False


def session_url(base_url: str) -> tuple[str, str, int, str]:
    """``(scheme, host, port, path)`` of the WebSocket endpoint of the environment at ``base_url``
    (``http://host:port``, a path prefix kept; ``ws://`` and ``wss://`` as given; for
    ``unix:///PATH``, ``("unix", PATH, 0, "/ws")``)."""
    parts = urlsplit(base_url)
    if parts.scheme == "unix":
        if parts.netloc or not parts.path.startswith("/"):
            raise OpenEnvError(f"{base_url!r} is not a Unix socket's address; give unix:///PATH")
        return "unix", parts.path, 0, "/ws"
    scheme = {"http": "ws", "https": "wss"}.get(parts.scheme, parts.scheme)
    if scheme not in ("ws", "wss") or not parts.hostname:
        raise OpenEnvError(f"{base_url!r} is not an environment's address; give http://HOST:PORT")
    port = parts.port or (443 if scheme == "wss" else 80)
    path = parts.path.rstrip("/")
    return scheme, parts.hostname, port, path if path.endswith("/ws") else path + "/ws"


class OpenEnvSession:
    """One environment instance on the server, for one episode. Use as a context manager.

    ``timeout_s`` bounds connecting and each answer. Every method raises ``OpenEnvError`` when
    the server cannot be reached, answers outside the protocol, or reports an error."""

    def __init__(self, base_url: str, timeout_s: float = 30.0):
        self.base_url = base_url
        scheme, host, port, path = session_url(base_url)
        try:
            raw = _connect(scheme, host, port, timeout_s)
            self._sock = ssl.create_default_context().wrap_socket(raw, server_hostname=host) if scheme == "wss" else raw
            self._handshake(host, port, path)
        except OSError as exc:
            raise OpenEnvError(f"cannot open a session at {base_url}: {exc}") from None
        self._buffer = b""

    def __enter__(self) -> OpenEnvSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def reset(self, **options: Any) -> StepResult:
        """Start an episode (``options``: the environment's reset fields, e.g. ``seed``)."""
        return _step_result(self._ask({"type": "reset", "data": options}, "observation"))

    def step(self, action: dict[str, Any]) -> StepResult:
        """Send one action (the fields of the environment's action model)."""
        return _step_result(self._ask({"type": "step", "data": action}, "observation"))

    def state(self) -> dict[str, Any]:
        """The environment's state (``episode_id``, ``step_count`` and its own fields)."""
        return self._ask({"type": "state"}, "state")

    def close(self) -> None:
        if self._sock is None:
            return
        try:
            self._send(json.dumps({"type": "close"}))
            self._send_frame(_CLOSE, struct.pack("!H", 1000))
        except OSError:
            pass
        finally:
            self._sock.close()
            self._sock = None  # type: ignore[assignment]

    def _ask(self, message: dict[str, Any], expected: str) -> dict[str, Any]:
        try:
            self._send(json.dumps(message))
            answer = json.loads(self._receive())
        except OSError as exc:
            raise OpenEnvError(f"{self.base_url}: the session broke: {exc}") from None
        except ValueError as exc:
            raise OpenEnvError(f"{self.base_url}: an answer that is not JSON: {exc}") from None
        kind, data = (answer.get("type"), answer.get("data")) if isinstance(answer, dict) else (None, None)
        if kind == "error":
            detail = utf8_safe(str(data.get("message", data) if isinstance(data, dict) else data))
            code = data.get("code") if isinstance(data, dict) else None
            raise OpenEnvError(
                f"{self.base_url}: the environment answered {message['type']} with an error: {_shortened(detail)}",
                code,
                detail,
            )
        if kind != expected or not isinstance(data, dict):
            raise OpenEnvError(f"{self.base_url}: expected a {expected!r} message, got {str(answer)[:200]}")
        return data

    def _handshake(self, host: str, port: int, path: str) -> None:
        key = base64.b64encode(os.urandom(16)).decode()
        request = (
            f"GET {path} HTTP/1.1\r\nHost: {_host_header(host, port)}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        self._sock.sendall(request.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self._sock.recv(4096)
            if not chunk or len(head) > 65536:
                raise OpenEnvError(f"{self.base_url}: the server closed the connection during the handshake")
            head += chunk
        head, self._buffer = head.split(b"\r\n\r\n", 1)
        status = head.split(b"\r\n", 1)[0].decode("latin-1")
        if " 101 " not in status + " ":
            raise OpenEnvError(f"{self.base_url}: no WebSocket session at {path} ({status})")

    def _send(self, text: str) -> None:
        self._send_frame(_TEXT, text.encode())

    def _send_frame(self, opcode: int, payload: bytes) -> None:
        header = bytes([0x80 | opcode])
        size = len(payload)
        if size < 126:
            header += bytes([0x80 | size])
        elif size < 65536:
            header += bytes([0x80 | 126]) + struct.pack("!H", size)
        else:
            header += bytes([0x80 | 127]) + struct.pack("!Q", size)
        mask = os.urandom(4)
        self._sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def _read(self, size: int) -> bytes:
        while len(self._buffer) < size:
            chunk = self._sock.recv(max(65536, size - len(self._buffer)))
            if not chunk:
                raise OSError("the server closed the connection")
            self._buffer += chunk
        data, self._buffer = self._buffer[:size], self._buffer[size:]
        return data

    def _receive(self) -> str:
        """The next whole text message (fragments joined; pings answered)."""
        parts: list[bytes] = []
        while True:
            first, second = self._read(2)
            opcode, size = first & 0x0F, second & 0x7F
            if size == 126:
                size = struct.unpack("!H", self._read(2))[0]
            elif size == 127:
                size = struct.unpack("!Q", self._read(8))[0]
            if size > MAX_MESSAGE_BYTES:
                raise OSError(f"a message of {size} bytes (more than {MAX_MESSAGE_BYTES})")
            mask = self._read(4) if second & 0x80 else b""
            payload = self._read(size)
            if mask:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            if opcode == _PING:
                self._send_frame(_PONG, payload)
                continue
            if opcode == _CLOSE:
                raise OSError("the server closed the session")
            parts.append(payload)
            if first & 0x80:
                return b"".join(parts).decode()


def _connect(scheme: str, host: str, port: int, timeout_s: float) -> socket.socket:
    """A connected socket to ``host:port``, or to the Unix socket at ``host`` for ``unix``."""
    if scheme != "unix":
        return socket.create_connection((host, port), timeout=timeout_s)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout_s)
        sock.connect(host)
    except OSError:
        sock.close()
        raise
    return sock


def _host_header(host: str, port: int) -> str:
    return "localhost" if port == 0 else f"{host}:{port}"


def _shortened(text: str, limit: int = 500) -> str:
    """``text``, cut to ``limit`` characters when longer (an error may quote a whole action)."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def _finite_number(value: Any) -> bool:
    """Whether ``value`` is a JSON number that is a finite float (an integer of 400 digits is not)."""
    if not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _step_result(data: dict[str, Any]) -> StepResult:
    observation = data.get("observation", {})
    reward = data.get("reward")
    if not isinstance(observation, dict) or not (reward is None or _finite_number(reward)):
        raise OpenEnvError(
            f"an observation outside the protocol (the reward is a finite number or null): {str(data)[:200]}"
        )
    return StepResult(
        observation=observation, reward=None if reward is None else float(reward), done=bool(data.get("done"))
    )


def environment_description(base_url: str, timeout_s: float = 30.0) -> tuple[dict[str, Any], dict[str, Any]]:
    """The server's ``GET /metadata`` (``name``, ``description``, ...) and ``GET /schema``
    (``action``, ``observation``, ``state``: JSON schemas); OpenEnvError when either fails."""
    scheme, host, port, path = session_url(base_url)
    root = base_url.rstrip("/") if scheme == "unix" else f"{'https' if scheme == 'wss' else 'http'}://{host}:{port}"
    answers = []
    for endpoint in ("/metadata", "/schema"):
        where = f"{root}{path.removesuffix('/ws')}{endpoint}"
        try:
            value = json.loads(_get(scheme, host, port, path.removesuffix("/ws") + endpoint, timeout_s))
        except (OSError, ValueError) as exc:
            raise OpenEnvError(f"cannot read {where}: {exc}") from None
        if not isinstance(value, dict):
            raise OpenEnvError(f"{where} answered {str(value)[:200]}")
        answers.append(value)
    return answers[0], answers[1]


def _get(scheme: str, host: str, port: int, path: str, timeout_s: float) -> bytes:
    """The body of ``GET path`` (OSError on a failed request or a status other than 200)."""
    import http.client

    if scheme == "wss":
        connection: http.client.HTTPConnection = http.client.HTTPSConnection(host, port, timeout=timeout_s)
    else:
        connection = http.client.HTTPConnection(
            host if scheme != "unix" else "localhost", port or None, timeout=timeout_s
        )
        if scheme == "unix":
            connection.sock = _connect(scheme, host, port, timeout_s)
    try:
        connection.request("GET", path)
        answer = connection.getresponse()
        body = answer.read(MAX_MESSAGE_BYTES)
        if answer.status != 200:
            raise OSError(f"HTTP {answer.status} {answer.reason}")
        return body
    finally:
        connection.close()
