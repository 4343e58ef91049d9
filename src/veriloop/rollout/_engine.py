"""The generation-engine interface and its registry.

An engine turns prompts into samples. Token-level engines (``hf``) take token-id prompts and
report token ids and log-probs, which training needs; text-level engines (``openai``) take
chat messages and are for evaluating served models. ``update_weights`` is where a trainer
pushes new weights: an in-process vLLM engine fits the same interface.

Sessions are an optional extension for multi-turn episodes. An engine whose ``keeps_sessions``
is true accepts ``sessions=[key, ...]`` (one per prompt, ``n=1``) in ``generate`` and
``agenerate``: a request continues the conversation of its key, and the engine may reuse
what it computed for the key's earlier requests (the ``hf`` engine reuses keys and values,
``_kv_sessions``). The samples must be those of a request without a session.
``end_session(key)`` frees what the key kept. Engines without the attribute (``openai``,
``replay``) are called without sessions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from veriloop.core import Registry
from veriloop.rollout._sampling import Sample, SamplingParams

Prompt = Sequence[int] | Sequence[dict[str, str]]
"""Token ids (token-level engines) or chat messages (every engine)."""


@runtime_checkable
class Engine(Protocol):
    name: str
    policy_version: int

    @property
    def tokenizer(self) -> Any | None:
        """The tokenizer for token-level engines; None for text-level ones."""

    def generate(self, prompts: Sequence[Prompt], params: SamplingParams) -> list[list[Sample]]:
        """``params.n`` samples for each prompt, in prompt order."""

    async def agenerate(self, prompts: Sequence[Prompt], params: SamplingParams) -> list[list[Sample]]:
        """The same, without blocking the event loop; concurrent calls may be batched together."""

    def update_weights(self, state_dict: dict[str, Any] | None, version: int) -> None:
        """Load new policy weights (None: the engine shares the trainer's model) and set the version."""

    def close(self) -> None: ...


ENGINES: Registry[Any] = Registry("generation engine")
"""name -> factory(**options) -> Engine"""


def create_engine(name: str, **options: Any) -> Engine:
    """Build a registered engine by name, e.g. ``create_engine("hf", model="runs/x/final")``."""
    return ENGINES.get(name)(**options)
