"""An episode's token context, and the context budget that bounds it.

The budget (``EpisodeConfig.context_budget``) bounds the tokens in the model's context during
a turn: what it is shown, plus up to the task's new tokens per turn (``max_tokens_per_turn``, or
its domain's entry in ``max_tokens_by_domain``). When appending the next observation would
break it, ``EpisodeConfig.context_policy`` decides:

- ``truncate``: the observation is cut in the middle; its head and tail stay, around a marker
  that says how many tokens were cut. The context only grows, so the episode stays one
  training row.
- ``drop_oldest``: earlier observations are replaced by a short marker, oldest first, until
  the new one fits. The prompt (system message, task statement and its constraints) is
  pinned, and so are the model's own turns. This rewrites the context in the middle.
- ``stop``: the episode ends with stop reason ``context_budget``.

When the chosen policy cannot make the observation fit, the episode stops the same way.

Training data stays exact. A rewrite closes the context the model has seen so far as a
``Segment`` (mask 1 on the tokens generated in it, with their sampler log-probs), and the
rewritten context starts a new one in which everything carried over has mask 0 and
log-prob 0.0; the turns that follow add mask-1 tokens to it. Every generated token is trained
once, in the context it was sampled from, so its log-prob under the trainer's forward of that
row is the sampler's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from veriloop.core import Segment

ContextPolicy = Literal["truncate", "drop_oldest", "stop"]
CUT_MARKER = "\n[... {count} tokens cut ...]\n"
DROPPED_OBSERVATION = "[earlier output dropped to fit the context]"
_MIN_KEPT_TOKENS = 8  # a truncated observation keeps at least this many of its own tokens


@dataclass
class _Shown:
    """An observation still shown in full: completion slots [start, end), message ``message``."""

    start: int
    end: int
    message: int


@dataclass
class TokenContext:
    """What the model is shown: ``prompt_ids`` then ``completion_ids`` (with the training fields).

    ``tokens`` counts every completion token appended over the episode, rewrites included
    (the episode's token budget); ``len()`` is the current context.
    """

    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)  # weights version of each generated token (0 elsewhere)
    segments: list[Segment] = field(default_factory=list)
    tokens: int = 0
    _shown: list[_Shown] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.prompt_ids) + len(self.completion_ids)

    @property
    def ids(self) -> list[int]:
        return self.prompt_ids + self.completion_ids

    def add_generated(self, ids: tuple[int, ...], logprobs: tuple[float, ...], versions: tuple[int, ...]) -> None:
        """Append generated ``ids``, their log-probs and the weights version of each (one per id)."""
        self.completion_ids += ids
        self.logprobs += logprobs if len(logprobs) == len(ids) else [0.0] * len(ids)
        self.versions += versions
        self.mask += [1] * len(ids)
        self.tokens += len(ids)

    def add_observation(self, ids: list[int], message: int) -> None:
        """Append the ids of observation message number ``message`` (mask 0)."""
        self._shown.append(_Shown(len(self.completion_ids), len(self.completion_ids) + len(ids), message))
        self.completion_ids += ids
        self.logprobs += [0.0] * len(ids)
        self.versions += [0] * len(ids)
        self.mask += [0] * len(ids)
        self.tokens += len(ids)

    def droppable(self, marker_tokens: int) -> _Shown | None:
        """The oldest observation still shown in full that is longer than ``marker_tokens``."""
        return next((s for s in self._shown if s.end - s.start > marker_tokens), None)

    def replace(self, shown: _Shown, ids: list[int]) -> None:
        """Show ``ids`` instead of observation ``shown``; the first rewrite since the last turn
        closes the context so far as a segment, and carries everything over at mask 0."""
        if any(self.mask):
            self.segments.append(
                Segment(
                    prompt_ids=tuple(self.prompt_ids),
                    completion_ids=tuple(self.completion_ids),
                    logprobs=tuple(self.logprobs),
                    loss_mask=tuple(self.mask),
                    token_versions=tuple(self.versions),
                )
            )
            self.logprobs = [0.0] * len(self.completion_ids)
            self.versions = [0] * len(self.completion_ids)
            self.mask = [0] * len(self.completion_ids)
        shift = len(ids) - (shown.end - shown.start)
        self.completion_ids[shown.start : shown.end] = ids
        self.logprobs[shown.start : shown.end] = [0.0] * len(ids)
        self.versions[shown.start : shown.end] = [0] * len(ids)
        self.mask[shown.start : shown.end] = [0] * len(ids)
        self._shown.remove(shown)
        for later in self._shown:
            if later.start >= shown.end:
                later.start, later.end = later.start + shift, later.end + shift


Render = Callable[[str], list[int]]
"""Observation text -> the ids that show it after the current context."""


def truncate_middle(tokenizer: Any, text: str, keep_tokens: int) -> str:
    """``text`` with its middle cut: the first and last ``keep_tokens // 2`` tokens kept around
    ``CUT_MARKER`` (``text`` itself when it has at most ``keep_tokens`` tokens)."""
    ids = tokenizer.encode(text, add_special_tokens=False)
    if len(ids) <= keep_tokens:
        return text
    head, tail = keep_tokens - keep_tokens // 2, keep_tokens // 2
    cut = len(ids) - head - tail
    return tokenizer.decode(ids[:head]) + CUT_MARKER.format(count=cut) + tokenizer.decode(ids[len(ids) - tail :])


def fit_by_truncation(tokenizer: Any, text: str, render: Render, room: int) -> tuple[str, list[int]] | None:
    """The observation cut in the middle so that its ids fit in ``room`` tokens, with those ids;
    None when even a cut keeping ``_MIN_KEPT_TOKENS`` of its tokens does not fit."""
    ids = render(text)
    content = len(tokenizer.encode(text, add_special_tokens=False))
    keep = content - (len(ids) - room)  # tokens of its own to keep; the marker's cost comes off below
    keep -= len(tokenizer.encode(CUT_MARKER.format(count=content), add_special_tokens=False))
    for _ in range(4):  # retokenising at the cut can shift a count by a token or two
        if keep < _MIN_KEPT_TOKENS:
            return None
        shown = truncate_middle(tokenizer, text, keep)
        ids = render(shown)
        if len(ids) <= room:
            return shown, ids
        keep -= len(ids) - room
    return None
