"""The gateway's open episodes: their recorded calls, the replies later calls may continue, and
the record file finished episodes are appended to.

Thread-safe: the server's event loop records and finishes episodes while a trainer's thread
finishes and collects them. A call is recorded once its answer is built, so a request that
failed leaves nothing; an episode is not finished while one of its calls is being answered
(HTTP: 409; ``collect`` waits).
"""

from __future__ import annotations

import dataclasses
import os
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from veriloop.core import UserError
from veriloop.rollout._gateway_records import GatewayCall, GatewayEpisode

RECORD_FILE = "episodes.jsonl"


@dataclass(frozen=True)
class Reply:
    """A recorded chat choice, as a later request may continue it."""

    call: int  # the call's index in its episode
    tools: str  # tools_key of its request
    messages: tuple[tuple[Any, ...], ...]  # message_key of each message of its request
    reply: tuple[Any, ...]  # message_key of the assistant message returned
    recorded_ids: tuple[int, ...]  # its prompt ids, then its sampled ids
    ended_by_eos: bool


@dataclass
class OpenEpisode:
    id: str
    named: bool  # False: a request that named no episode, finished once answered
    calls: list[GatewayCall] = field(default_factory=list)
    replies: list[Reply] = field(default_factory=list)
    requests: int = 0
    in_flight: int = 0
    seed: int | None = None  # the seed of requests that name none (the request's number added)

    def continued(self, tools: str, messages: Sequence[tuple[Any, ...]]) -> list[Reply]:
        """Recorded replies that ``messages`` continue (the request's messages, then this reply,
        then anything), newest first."""
        return [
            reply
            for reply in reversed(self.replies)
            if reply.tools == tools
            and len(messages) > len(reply.messages)
            and messages[len(reply.messages)] == reply.reply
            and tuple(messages[: len(reply.messages)]) == reply.messages
        ]

    def extended_call(self, ids: Sequence[int]) -> int | None:
        """The newest call whose prompt and sampled ids ``ids`` starts with."""
        for call in reversed(self.calls):
            prompt, sampled = call.prompt_token_ids, call.sampled_token_ids
            end = len(prompt) + len(sampled)
            if len(ids) > end and tuple(ids[: len(prompt)]) == prompt and tuple(ids[len(prompt) : end]) == sampled:
                return call.index
        return None


class EpisodeBook:
    """Open episodes by id; finished ones go to the record file, ``on_finish``, and (those
    finished over HTTP, when ``hold_finished``) a shelf that ``collect`` takes them from.
    ``end_session`` is called with a named episode's id when it finishes (its engine session)."""

    def __init__(
        self,
        record_dir: Path | None = None,
        hold_finished: bool = True,
        on_finish: Callable[[GatewayEpisode], None] | None = None,
        end_session: Callable[[str], None] | None = None,
    ):
        self.record_path = Path(record_dir) / RECORD_FILE if record_dir is not None else None
        if self.record_path is not None:
            try:
                self.record_path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise UserError(f"{record_dir}: cannot record episodes there: {exc.strerror or exc}") from None
        self.hold_finished = hold_finished
        self.on_finish = on_finish
        self.end_session = end_session
        self._open: dict[str, OpenEpisode] = {}
        self._held: dict[str, GatewayEpisode] = {}
        self._changed = threading.Condition()
        self._write_lock = threading.Lock()

    def open(self, episode_id: str, seed: int | None) -> None:
        """Open ``episode_id`` before its first request, with the seed its requests sample from
        when they name none."""
        with self._changed:
            self._open.setdefault(episode_id, OpenEpisode(id=episode_id, named=True)).seed = seed

    def begin(self, episode_id: str | None) -> tuple[OpenEpisode, int]:
        """The episode a request lands in (opened if new; a fresh one for no id) and the
        request's number in it; the request counts as in flight until ``end``."""
        with self._changed:
            if episode_id is None:
                episode = OpenEpisode(id=f"anon-{uuid.uuid4().hex[:16]}", named=False)
            else:
                episode = self._open.setdefault(episode_id, OpenEpisode(id=episode_id, named=True))
            episode.in_flight += 1
            episode.requests += 1
            return episode, episode.requests - 1

    def end(self, episode: OpenEpisode, recorded: Sequence[tuple[GatewayCall, Reply | None]] = ()) -> None:
        """A request of ``episode`` is answered, its calls (each with the reply a later request may
        continue, for chat) recorded under the next indices; or it failed, and nothing is."""
        with self._changed:
            for call, reply in recorded:
                index = len(episode.calls)
                episode.calls.append(call.model_copy(update={"index": index}))
                if reply is not None:
                    episode.replies.append(dataclasses.replace(reply, call=index))
            episode.in_flight -= 1
            if episode.named and not episode.calls and not episode.in_flight and self._open.get(episode.id) is episode:
                del self._open[episode.id]  # opened by requests that all failed: nothing to keep
            self._changed.notify_all()

    def finish(self, episode_id: str, hold: bool = False) -> GatewayEpisode | None:
        """Close an open named episode: None when none is open, ValueError while a call is in
        flight. ``hold``: keep it for ``collect`` (when the book holds finished episodes)."""
        with self._changed:
            episode = self._open.get(episode_id)
            if episode is None:
                return None
            if episode.in_flight:
                raise ValueError(f"episode {episode_id!r} has {episode.in_flight} calls being answered")
            del self._open[episode_id]
            finished = GatewayEpisode(id=episode.id, calls=tuple(episode.calls))
            if not episode.requests:  # opened ahead (``open``) and never called: nothing to record
                return finished
            if hold and self.hold_finished:
                self._held[episode_id] = finished
        if self.end_session is not None:
            self.end_session(episode_id)
        self._deliver(finished)
        return finished

    def finish_anonymous(self, episode: OpenEpisode) -> None:
        """Close the episode of a request that named none, once its answer is sent."""
        if episode.calls:
            self._deliver(GatewayEpisode(id=episode.id, calls=tuple(episode.calls)))

    def collect(self, episode_id: str, timeout_s: float | None = 60.0) -> GatewayEpisode:
        """The episode, finished: an open one once its calls in flight are answered (TimeoutError
        past ``timeout_s``), one finished over HTTP, or an empty one when there is none."""
        with self._changed:
            open_ = self._open.get(episode_id)
            if open_ is not None and not self._changed.wait_for(lambda: open_.in_flight == 0, timeout_s):
                raise TimeoutError(f"episode {episode_id!r}: calls still being answered after {timeout_s} s")
            held = self._held.pop(episode_id, None)
        if held is not None:
            return held
        return self.finish(episode_id) or GatewayEpisode(id=episode_id)

    def open_ids(self) -> list[str]:
        with self._changed:
            return list(self._open)

    def close(self) -> None:
        """Finish every open episode (an episode left open when the gateway stops is still recorded)."""
        for episode_id in self.open_ids():
            try:
                self.finish(episode_id)
            except ValueError:
                continue

    def _deliver(self, episode: GatewayEpisode) -> None:
        if self.record_path is not None:
            self._append(episode.model_dump_json() + "\n")
        if self.on_finish is not None:
            self.on_finish(episode)

    def _append(self, line: str) -> None:
        """One whole line, in one write to a file opened for appending: readers never see half."""
        data = line.encode()
        with self._write_lock:
            fd = os.open(self.record_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)  # type: ignore[arg-type]
            try:
                written = 0
                while written < len(data):
                    written += os.write(fd, data[written:])
            finally:
                os.close(fd)
