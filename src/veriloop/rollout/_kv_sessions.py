"""Keys and values kept between the turns of a conversation, so a next turn prefills only what is new.

An episode names its conversation by a session key. After each turn the ``hf`` engine keeps,
under that key, the tokens it has run through the model (the prompt, then every generated
token but the last, which was sampled and never fed back) and their keys and values per
layer. The next request of the session reuses the longest common prefix of those tokens and
its new prompt, and prefills the rest: the last token of the previous turn and the new
observation. A context rewritten in the middle (see ``EpisodeConfig.context_policy``) reuses
what comes before the rewrite.

Entries hold the weights version that computed them and are ignored after a weight update;
the least recently used are evicted past ``max_bytes``. A miss only costs a longer prefill:
the samples are the same either way (tested bit for bit, see ``bench/multiturn.py`` for the
cost).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import torch

LayerKV = tuple[torch.Tensor, torch.Tensor]
"""(key, value) of one layer, each (kv_heads, tokens, head_dim)."""


@dataclass(frozen=True)
class _Entry:
    tokens: tuple[int, ...]
    layers: tuple[LayerKV, ...]
    version: int
    nbytes: int


class KVSessions:
    """Per-session keys and values, least recently used evicted past ``max_bytes``."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def nbytes(self) -> int:
        return self._bytes

    def reusable(self, session: str | None, ids: Sequence[int], version: int) -> tuple[int, tuple[LayerKV, ...]]:
        """How many leading tokens of ``ids`` have kept keys and values, and those (per layer,
        ``tokens`` long). At least the last token of ``ids`` is left to prefill: its logits start
        the turn."""
        entry = self._entries.get(session) if session is not None else None
        if entry is None or entry.version != version:
            return 0, ()
        self._entries.move_to_end(session)
        limit = min(len(entry.tokens), len(ids) - 1)
        common = next((i for i in range(limit) if entry.tokens[i] != ids[i]), limit)
        if common == 0:
            return 0, ()
        return common, tuple((k[:, :common], v[:, :common]) for k, v in entry.layers)

    def keep(self, session: str, tokens: Sequence[int], layers: Sequence[LayerKV], version: int) -> None:
        """Keep ``layers`` (each (kv_heads, len(tokens), head_dim)) as the state of ``session``."""
        self.release(session)
        nbytes = sum(k.nbytes + v.nbytes for k, v in layers)
        if nbytes > self.max_bytes:
            return
        self._entries[session] = _Entry(tuple(tokens), tuple(layers), version, nbytes)
        self._bytes += nbytes
        while self._bytes > self.max_bytes:
            _, evicted = self._entries.popitem(last=False)
            self._bytes -= evicted.nbytes

    def release(self, session: str) -> None:
        entry = self._entries.pop(session, None)
        if entry is not None:
            self._bytes -= entry.nbytes

    def clear(self) -> None:
        self._entries.clear()
        self._bytes = 0
