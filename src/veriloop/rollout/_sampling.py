"""Sampling parameters and the sample record every engine returns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from pydantic import BaseModel, ConfigDict, Field

FinishReason = Literal["eos", "stop", "length", "repetition", "error"]


class SamplingParams(BaseModel):
    """How to sample. ``temperature=0`` is greedy decoding."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    n: int = Field(default=1, ge=1, description="samples per prompt")
    temperature: float = Field(default=1.0, ge=0, description="softmax temperature; 0 is greedy")
    top_p: float = Field(default=1.0, gt=0, le=1, description="nucleus sampling mass")
    top_k: int = Field(default=0, ge=0, description="sample among the k likeliest tokens only (0: all)")
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
    under the distribution it drew from: temperature-scaled, then cut to ``top_k``/``top_p`` and
    renormalised over the tokens kept (``truncation_mask``; the distribution a trainer recomputes
    with ``truncated_logprobs``); empty when the engine cannot report them. ``versions`` is the
    weights version that sampled each token (it changes mid-sample when a weight update lands
    during generation: partial rollouts); empty when the engine does not tag tokens, then every
    token is its ``policy_version``'s.
    """

    text: str
    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    finish_reason: FinishReason
    error: str = ""
    counted_tokens: int = 0
    versions: tuple[int, ...] = ()  # tokens a server counted for it, when it returns text and no ids

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids) or self.counted_tokens


def truncation_mask(logits: torch.Tensor, top_k: int = 0, top_p: float = 1.0) -> torch.Tensor | None:
    """(..., V) bool: the tokens a sampler may draw from temperature-scaled ``logits`` (..., V) after
    the top-k cut (every token tied with the k-th kept) and then the top-p cut (the smallest set of
    the likeliest tokens whose renormalised mass reaches ``top_p``), the order vLLM and Hugging Face
    apply them in. None when neither cuts anything.
    """
    if top_k <= 0 and top_p >= 1:
        return None
    keep = torch.ones_like(logits, dtype=torch.bool)
    if 0 < top_k < logits.shape[-1]:
        keep = logits >= torch.topk(logits, top_k, dim=-1).values[..., -1:]
    if top_p < 1:
        sorted_logits, order = torch.sort(logits.masked_fill(~keep, float("-inf")), descending=True, dim=-1)
        probs = torch.softmax(sorted_logits, dim=-1)
        before = probs.cumsum(dim=-1) - probs  # (..., V) mass of the likelier tokens
        keep = keep & ~torch.zeros_like(keep).scatter(-1, order, before >= top_p)
    return keep


def truncated_logprobs(scaled: torch.Tensor, targets: torch.Tensor, top_k: int = 0, top_p: float = 1.0) -> torch.Tensor:
    """Log-probs (...) of ``targets`` (...) under temperature-scaled logits ``scaled`` (..., V) cut as
    ``truncation_mask`` cuts them and renormalised over the tokens kept: the distribution the sampler drew from.

    Gradients flow through the logits, not through which tokens are kept (a step function of
    them). The target itself always counts as kept, so a token the sampler drew on the boundary
    of the cut (its numerics rounding the other way) gets a finite log-prob rather than -inf.
    """
    chosen = scaled.gather(-1, targets[..., None])[..., 0]
    keep = truncation_mask(scaled.detach(), top_k, top_p)
    if keep is None:
        return chosen - torch.logsumexp(scaled, dim=-1)
    keep = keep.scatter(-1, targets[..., None], True)
    return chosen - torch.logsumexp(scaled.masked_fill(~keep, float("-inf")), dim=-1)
