"""Sampling parameters and the sample record every engine returns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

FinishReason = Literal["eos", "stop", "length", "repetition", "error"]


class SamplingParams(BaseModel):
    """How to sample. ``temperature=0`` is greedy decoding."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    n: int = Field(default=1, ge=1, description="samples per prompt")
    temperature: float = Field(default=1.0, ge=0, description="softmax temperature; 0 is greedy")
    top_p: float = Field(default=1.0, gt=0, le=1, description="nucleus sampling mass")
    max_tokens: int = Field(default=256, ge=1, description="new tokens per sample at most")
    stop: tuple[str, ...] = Field(default=(), description="strings that end a sample (kept in its text)")
    seed: int | None = Field(default=None, description="base seed; sample j of prompt i uses seed + j")
    ignore_eos: bool = Field(default=False, description="keep sampling past end-of-sequence (benchmarks)")
    repetition_stop: int = Field(
        default=0, ge=0, description="end a sample whose tail repeats a block this many times (0: off)"
    )


@dataclass(frozen=True)
class Sample:
    """One generated continuation.

    ``token_ids`` are exactly the generated tokens (the end-of-sequence token included when the
    model produced it); ``text`` is their decoding. ``logprobs`` are the sampler's log-probs
    under the temperature-scaled distribution, before top-p truncation (the distribution a
    trainer recomputes); empty when the engine cannot report them.
    """

    text: str
    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    finish_reason: FinishReason
    error: str = ""
    counted_tokens: int = 0  # tokens a server counted for it, when it returns text and no ids

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids) or self.counted_tokens
