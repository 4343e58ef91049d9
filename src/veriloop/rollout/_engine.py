"""The generation-engine interface and its registry.

An engine turns prompts into samples. Token-level engines (``hf``) take token-id prompts and
report token ids and log-probs, which training needs; text-level engines (``openai``) take
chat messages and are for evaluating served models. ``update_weights`` is where a trainer
pushes new weights (the in-process ``vllm`` engine loads them in place).

Sessions are an optional extension for multi-turn episodes. An engine whose ``keeps_sessions``
is true accepts ``sessions=[key, ...]`` (one per prompt, ``n=1``) in ``generate`` and
``agenerate``: a request continues the conversation of its key, and the engine may reuse
what it computed for the key's earlier requests (the ``hf`` engine reuses keys and values,
``_kv_sessions``). The samples must be those of a request without a session. The ``vllm``
engine keeps none: its prefix cache reuses a conversation's earlier turns without a key.
``end_session(key)`` frees what the key kept. Engines without the attribute (``openai``,
``replay``) are called without sessions.
"""

from __future__ import annotations

import asyncio
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


def encode_chat_or_ids(tokenizer: Any, prompt: Prompt) -> list[int]:
    """Token ids of a prompt: ids pass through; chat messages get the chat template once."""
    if prompt and isinstance(prompt[0], dict):
        ids = tokenizer.apply_chat_template(list(prompt), add_generation_prompt=True, tokenize=True)
        return list(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids)
    return [int(t) for t in prompt]  # type: ignore[arg-type]


def eos_token_ids(tokenizer: Any, generation_eos: int | list[int] | None) -> frozenset[int]:
    """The tokens that end a sample: the tokenizer's end-of-sequence and the generation config's."""
    eos = {tokenizer.eos_token_id}
    eos |= set(generation_eos) if isinstance(generation_eos, list) else {generation_eos}
    return frozenset(t for t in eos if t is not None)


GATHER_STEP_S = 0.001  # how long a batcher waits for one more request to arrive
GATHER_STEPS = 20  # the most steps it waits before a batch, however steadily requests arrive


async def gather_requests(pending: Sequence[tuple[Sequence[Any], Any, Any]], limit: int) -> None:
    """Wait while requests still arrive at a batcher, so that its next batch takes them together.

    ``pending`` holds ``(rows, params, future)`` items. One pass of the event loop lets every
    ready coroutine enqueue its request; then the wait goes on in steps of ``GATHER_STEP_S``
    for as long as each step brings more (``GATHER_STEPS`` at most), or until ``limit`` rows
    wait. Episodes released by the batch that just ended come back one at a time, each after
    its verification on another thread; without the wait the first of them would be sampled
    alone, a full run of decode steps for one row, while the others queue for the batch after.
    """
    await asyncio.sleep(0)
    for _ in range(GATHER_STEPS):
        before = len(pending)
        if sum(len(rows) for rows, _, _ in pending) >= limit:
            return
        await asyncio.sleep(GATHER_STEP_S)
        if len(pending) == before:
            return


def settle_batch(
    taken: Sequence[tuple[Sequence[Any], Any, asyncio.Future[list[Sample]]]], outcome: list[Sample] | Exception
) -> None:
    """Give each caller of a shared batch, ``(rows, params, future)`` in row order, its slice of the
    batch's samples, or the batch's exception (a failed batch fails its callers, not the loop)."""
    offset = 0
    for rows, _, future in taken:
        if not future.done():
            if isinstance(outcome, Exception):
                future.set_exception(outcome)
            else:
                future.set_result(outcome[offset : offset + len(rows)])
        offset += len(rows)


def create_engine(name: str, **options: Any) -> Engine:
    """Build a registered engine by name, e.g. ``create_engine("hf", model="runs/x/final")``."""
    return ENGINES.get(name)(**options)
