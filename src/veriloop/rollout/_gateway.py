"""``Gateway``: an OpenAI-compatible server in front of a generation engine that records the
exact tokens of every call, so that an unmodified agent program can be trained token for token.

    with Gateway(engine) as gateway:                      # serves on a loopback port, in a thread
        run_agent(base_url=gateway.episode_url("ep-1"))   # any OpenAI client, no headers needed
        episode = gateway.finish("ep-1")                  # every call's prompt and sampled ids
    trajectory = episode_trajectory(episode, reward=1.0)  # the rows a trainer trains on

The application (routes, guard, errors) is ``_gateway_app``; what one request does is
``_gateway_calls``; the records and the trajectory are ``_gateway_records``; the chat
template, tools and token-exact continuations are ``_gateway_chat``. docs/concepts/agents.md
describes the whole.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from veriloop.core import UserError
from veriloop.rollout._gateway_app import EPISODE_ID, create_gateway_app
from veriloop.rollout._gateway_calls import GatewayCalls, GatewayLimits, session_key
from veriloop.rollout._gateway_episodes import EpisodeBook
from veriloop.rollout._gateway_records import GatewayEpisode
from veriloop.sandbox import is_loopback

_START_TIMEOUT_S = 30.0


class Gateway:
    """An OpenAI-compatible server over ``engine`` that records every call by episode.

    ``engine``: a token-level engine (``hf``, ``vllm``: it has a tokenizer). The server listens
    on ``host:port`` (port 0: a free one, read back from ``port``) from construction; ``start``
    (or ``with``) serves in a background thread, ``serve_forever`` in this one. ``token``:
    every request needs ``Authorization: Bearer <token>``; without one only loopback clients
    are answered, and binding another address is refused. ``record_dir``: finished episodes are
    appended to ``record_dir/episodes.jsonl``, one JSON line each. ``policy_version``: read at
    each request and recorded with its calls (default: the engine's ``policy_version``, which a
    trainer's ``update_weights`` sets). ``hold_finished``: keep episodes finished over HTTP
    until ``finish`` collects them (the command line, which only records, turns it off).
    ``on_finish``: called with every finished episode, from the thread that finished it.
    Raises UserError for a bad address, port or token.
    """

    def __init__(
        self,
        engine: Any,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
        record_dir: str | Path | None = None,
        model_name: str = "veriloop",
        policy_version: Callable[[], int] | None = None,
        limits: GatewayLimits | None = None,
        hold_finished: bool = True,
        on_finish: Callable[[GatewayEpisode], None] | None = None,
    ):
        check_gateway_access(host, token)
        if getattr(engine, "tokenizer", None) is None:
            raise UserError(
                f"the gateway needs a token-level engine (hf or vllm), not {getattr(engine, 'name', engine)!r}"
            )
        self.engine = engine
        self.host = host
        self.limits = limits or GatewayLimits()
        self.book = EpisodeBook(
            Path(record_dir) if record_dir is not None else None, hold_finished, on_finish, self._end_session
        )
        version = policy_version or (lambda: int(engine.policy_version))
        self.calls = GatewayCalls(engine, model_name, version, self.limits)
        self.app = create_gateway_app(self.calls, self.book, token=token, max_body_bytes=self.limits.max_body_bytes)
        self._socket = _listen(host, port)
        self.port: int = self._socket.getsockname()[1]
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """The OpenAI base URL (``http://HOST:PORT/v1``); name episodes with ``X-Episode-Id``."""
        return f"{self._origin}/v1"

    def episode_url(self, episode_id: str, seed: int | None = None) -> str:
        """A base URL whose calls all land in ``episode_id`` (``OPENAI_BASE_URL`` for a program).
        With ``seed``, the episode is opened now, and its calls that name no seed sample from
        ``seed + 1000 * the call's number in the episode``: a seeded episode samples the same
        tokens for the same calls."""
        if not EPISODE_ID.match(episode_id):
            raise ValueError(f"episode id {episode_id!r}: use 1-128 letters, digits and ._:@-")
        if seed is not None:
            self.book.open(episode_id, seed)
        return f"{self._origin}/episodes/{quote(episode_id, safe='')}/v1"

    def finish(self, episode_id: str, timeout_s: float | None = 60.0) -> GatewayEpisode:
        """End an episode and return its calls (waiting up to ``timeout_s`` for calls still being
        answered). An episode the agent finished over HTTP is returned once; an unknown id is an
        episode without calls."""
        return self.book.collect(episode_id, timeout_s)

    def start(self) -> Gateway:
        """Serve in a background thread; returns once the server answers."""
        if self._thread is not None:
            return self
        import torch

        self._server = self._uvicorn()
        threads = torch.get_num_threads()

        def serve() -> None:
            # OpenMP keeps its thread count per thread: without this the server's thread would
            # sample with one OpenMP thread per core, a second pool beside the caller's.
            torch.set_num_threads(threads)
            self._server.run(sockets=[self._socket])

        self._thread = threading.Thread(target=serve, daemon=True)
        self._thread.name = f"veriloop-gateway:{self.port}"
        self._thread.start()
        deadline = time.monotonic() + _START_TIMEOUT_S
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the gateway on port {self.port} did not start")
            time.sleep(0.01)
        return self

    def serve_forever(self) -> None:
        """Serve in this thread until interrupted (SIGINT or SIGTERM)."""
        self._server = self._uvicorn()
        self._server.run(sockets=[self._socket])

    def close(self) -> None:
        """Stop serving; episodes still open are finished (and recorded)."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
        self._socket.close()
        self.book.close()

    def __enter__(self) -> Gateway:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def _origin(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def _uvicorn(self) -> Any:
        import uvicorn

        config = uvicorn.Config(self.app, log_level="warning", access_log=False, lifespan="off")
        return uvicorn.Server(config)

    def _end_session(self, episode_id: str) -> None:
        """Free what the engine kept for a finished episode's calls (the ``hf`` engine's keys and values)."""
        end_session = getattr(self.engine, "end_session", None)
        if end_session is not None:
            end_session(session_key(episode_id))


def check_gateway_access(host: str, token: str | None, port: int | None = None) -> None:
    """UserError unless the gateway may listen on ``host`` (any address with a token, loopback
    without) and, when ``port`` is given, can bind it now (checked before a model is loaded)."""
    if token is not None and not token.strip():
        raise UserError("the gateway's token is empty")
    if token is None and not is_loopback(host):
        raise UserError(f"refusing to listen on {host} without a token: anyone who can reach it could use the model")
    if port is not None:
        _listen(host, port).close()


def _listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket. Its protocol is named (IPPROTO_TCP) because asyncio sets TCP_NODELAY
    only on connections of such sockets; without it an answer's header and body, sent apart,
    wait on the client's delayed acknowledgement (40 ms a call)."""
    address = host.strip("[]")
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((address, port))
        listener.listen(2048)
    except OSError as exc:
        listener.close()
        raise UserError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return listener
