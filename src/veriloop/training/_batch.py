"""Training tensors from trajectories, and per-token log-probs of completions under a model."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from veriloop.core import Trajectory
from veriloop.rollout import LeanDecoder


@dataclass
class TokenBatch:
    """Right-padded sequences and their completion-aligned fields.

    ``input_ids``/``attention_mask``: (B, L) prompt + completion. Completion fields are (B, C):
    ``completion_ids``, ``loss_mask`` (1 on tokens the model generated), ``sampler_logprobs``.
    ``prompt_lengths``: (B,) where each row's completion starts. ``trajectory_index``: (B,) the
    trajectory each row comes from: one row per context the model saw (``Trajectory.contexts``),
    so a trajectory whose context a budget rewrote has several rows.
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    prompt_lengths: torch.Tensor
    completion_ids: torch.Tensor
    loss_mask: torch.Tensor
    sampler_logprobs: torch.Tensor
    trajectory_index: torch.Tensor

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    def select(self, rows: slice) -> TokenBatch:
        return TokenBatch(*(getattr(self, f)[rows] for f in self.__dataclass_fields__))


def token_batch(trajectories: Sequence[Trajectory], pad_id: int) -> TokenBatch:
    """One row per context of each trajectory, in order (see ``TokenBatch``)."""
    owners = [i for i, t in enumerate(trajectories) for _ in t.contexts()]
    contexts = [c for t in trajectories for c in t.contexts()]
    rows = len(contexts)
    width = max(len(t.prompt_ids) + len(t.completion_ids) for t in contexts)
    completion_width = max(max(len(t.completion_ids) for t in contexts), 1)
    input_ids = torch.full((rows, width), pad_id, dtype=torch.long)
    attention = torch.zeros((rows, width), dtype=torch.long)
    completion = torch.full((rows, completion_width), pad_id, dtype=torch.long)
    mask = torch.zeros((rows, completion_width))
    sampler = torch.zeros((rows, completion_width))
    prompt_lengths = torch.zeros(rows, dtype=torch.long)
    for i, t in enumerate(contexts):
        sequence = list(t.prompt_ids) + list(t.completion_ids)
        input_ids[i, : len(sequence)] = torch.tensor(sequence)
        attention[i, : len(sequence)] = 1
        prompt_lengths[i] = len(t.prompt_ids)
        n = len(t.completion_ids)
        if n:
            completion[i, :n] = torch.tensor(t.completion_ids)
            mask[i, :n] = torch.tensor(t.loss_mask, dtype=torch.float)
            if t.logprobs:
                sampler[i, :n] = torch.tensor(t.logprobs)
    return TokenBatch(input_ids, attention, prompt_lengths, completion, mask, sampler, torch.tensor(owners))


def completion_logprobs(
    model: Any, batch: TokenBatch, temperature: float, with_entropy: bool = False, lean: LeanDecoder | None = None
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs (B, C) of each completion token under ``model`` at ``temperature``.

    Also the per-token entropy (B, C) when asked. Gradients flow unless the caller disables
    them. ``lean`` (a LeanDecoder over the same model) computes the same values faster, each
    distinct prompt once for all the rows that share it.
    """
    device = next(model.parameters()).device
    if lean is not None:
        picked = lean.forward_prefixed(*_shared_prompts(batch, device))  # (B, C, V)
    else:
        width = batch.completion_ids.shape[1]
        input_ids, attention = batch.input_ids.to(device), batch.attention_mask.to(device)
        # Position p predicts token p + 1: the completion of row b is predicted by
        # positions prompt_len - 1 ... prompt_len + C - 2.
        offsets = batch.prompt_lengths.to(device)[:, None] - 1 + torch.arange(width, device=device)[None, :]  # (B, C)
        offsets = offsets.clamp(max=input_ids.shape[1] - 1)
        logits = model(input_ids=input_ids, attention_mask=attention).logits  # (B, L, V)
        picked = logits.gather(1, offsets[:, :, None].expand(-1, -1, logits.shape[-1]))  # (B, C, V)
    picked = (
        picked.to(torch.promote_types(picked.dtype, torch.float32)) / temperature
    )  # half precision computed in fp32
    targets = batch.completion_ids.to(device)
    logprobs = picked.gather(-1, targets[:, :, None])[:, :, 0] - torch.logsumexp(picked, dim=-1)  # (B, C)
    entropy = None
    if with_entropy:
        log_p = torch.log_softmax(picked, dim=-1)
        entropy = -(log_p.exp() * log_p).sum(-1)
    return logprobs, entropy


def micro_batches(rows: int, size: int) -> list[slice]:
    """Consecutive row ranges of at most ``size`` covering ``range(rows)``."""
    return [slice(start, min(start + size, rows)) for start in range(0, rows, size)]


@torch.no_grad()
def logprobs_without_grad(
    model: Any, batch: TokenBatch, temperature: float, micro_batch_size: int, lean: LeanDecoder | None = None
) -> torch.Tensor:
    """Log-probs (B, C) of each completion token under ``model``, on the CPU, computed without
    grad ``micro_batch_size`` rows at a time (the reference pass and the recompute pass)."""
    parts = [
        completion_logprobs(model, batch.select(rows), temperature, lean=lean)[0].cpu()
        for rows in micro_batches(len(batch), micro_batch_size)
    ]
    return torch.cat(parts)


def _shared_prompts(batch: TokenBatch, device: Any) -> tuple[torch.Tensor, ...]:
    """``LeanDecoder.forward_prefixed`` arguments: each distinct prompt once, the rows' completions.

    Returns prefix_ids (P, Tp) right-padded, prefix_lengths (P,), row_prefix (B,),
    suffix_ids (B, C), suffix_lengths (B,).
    """
    lengths = batch.prompt_lengths.tolist()
    if min(lengths) < 1:
        raise ValueError("every sequence needs a prompt of at least one token")
    index: dict[tuple[int, ...], int] = {}
    row_prefix = [index.setdefault(tuple(row[:n]), len(index)) for row, n in zip(batch.input_ids.tolist(), lengths)]
    prefix_ids = torch.zeros((len(index), max(lengths)), dtype=torch.long)
    for prompt, i in index.items():
        prefix_ids[i, : len(prompt)] = torch.tensor(prompt)
    prefix_lengths = torch.tensor([len(prompt) for prompt in index])
    suffix_lengths = batch.attention_mask.sum(1) - batch.prompt_lengths
    return (
        prefix_ids.to(device),
        prefix_lengths.to(device),
        torch.tensor(row_prefix, device=device),
        batch.completion_ids.to(device),
        suffix_lengths.to(device),
    )
