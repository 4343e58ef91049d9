"""Training tensors from trajectories, and per-token log-probs of completions under a model."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.utils.checkpoint

from veriloop.core import Trajectory, UserError
from veriloop.rollout import LeanDecoder, truncated_logprobs


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
    """One row per context of each trajectory, in order (see ``TokenBatch``); no trajectories give
    a batch of no rows (a data-parallel rank whose share of a step is empty)."""
    owners = [i for i, t in enumerate(trajectories) for _ in t.contexts()]
    contexts = [c for t in trajectories for c in t.contexts()]
    rows = len(contexts)
    width = max((len(t.prompt_ids) + len(t.completion_ids) for t in contexts), default=1)
    completion_width = max(max((len(t.completion_ids) for t in contexts), default=1), 1)
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
    return TokenBatch(
        input_ids, attention, prompt_lengths, completion, mask, sampler, torch.tensor(owners, dtype=torch.long)
    )


def completion_logprobs(
    model: Any,
    batch: TokenBatch,
    temperature: float,
    with_entropy: bool = False,
    lean: LeanDecoder | None = None,
    chunk_tokens: int = 0,
    checkpoint_layers: bool = False,
    autocast: str = "none",
    top_k: int = 0,
    top_p: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs (B, C) of each completion token under ``model`` at ``temperature``, in the
    distribution cut to ``top_k``/``top_p`` and renormalised when they cut (``truncated_logprobs``:
    the one the sampler drew from).

    Also the per-token entropy (B, C) of the whole temperature-scaled distribution when asked.
    Gradients flow unless the caller disables them. ``lean`` (a LeanDecoder over the same model) computes the same values faster, each
    distinct prompt once for all the rows that share it.

    ``chunk_tokens`` > 0 bounds memory on long sequences: the vocabulary logits exist for
    ``chunk_tokens`` completion positions at a time, (B, chunk, V), never (B, C, V), and under
    grad each chunk keeps only its hidden states for the backward pass, which recomputes the
    chunk's logits. Values and gradients are those of the unchunked pass. ``checkpoint_layers``
    recomputes the lean pass's decoder layers in the backward pass instead of keeping their
    activations (for the model's own forward, see ``enable_activation_checkpointing``).
    ``autocast`` "bfloat16" runs the pass's matrix products in bfloat16 (``autocast_context``).
    """
    device = next(model.parameters()).device
    with autocast_context(autocast, device):
        return _completion_logprobs(
            model, batch, (temperature, top_k, top_p), with_entropy, lean, chunk_tokens, checkpoint_layers
        )


def _completion_logprobs(
    model: Any,
    batch: TokenBatch,
    sampling: tuple[float, int, float],
    with_entropy: bool,
    lean: LeanDecoder | None,
    chunk_tokens: int,
    checkpoint_layers: bool,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    device = next(model.parameters()).device
    targets = batch.completion_ids.to(device)  # (B, C)
    if lean is not None:
        prefixed = _shared_prompts(batch, device)
        hidden = lean.forward_prefixed(*prefixed, head=False, checkpoint_layers=checkpoint_layers)  # (B, C, H)
        head = lean.head
    elif chunk_tokens > 0 and logits_are_head_of_decoder(model):
        hidden, head = _predicting_hidden(model, batch, device), model.get_output_embeddings()
    else:
        logits = model(input_ids=batch.input_ids.to(device), attention_mask=batch.attention_mask.to(device)).logits
        picked = logits.gather(1, _predicting_positions(batch, device, logits.shape[-1]))  # (B, C, V)
        return _token_stats(picked, targets, sampling, with_entropy)
    if chunk_tokens <= 0:
        return _token_stats(head(hidden), targets, sampling, with_entropy)

    def stats(hidden_chunk: torch.Tensor, target_chunk: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return _chunk_stats(head, hidden_chunk, target_chunk, sampling, with_entropy)

    parts = over_position_chunks(stats, hidden, targets, chunk_tokens=chunk_tokens)
    logprobs = torch.cat([p[0] for p in parts], dim=1)  # (B, C)
    return logprobs, torch.cat([p[1] for p in parts], dim=1) if with_entropy else None


def over_position_chunks(
    compute: Any, hidden: torch.Tensor, *aligned: torch.Tensor, chunk_tokens: int
) -> list[tuple[torch.Tensor, ...]]:
    """``compute(hidden_chunk, *aligned_chunks)`` for each run of ``chunk_tokens`` positions.

    ``hidden`` (B, T, H) and each of ``aligned`` (B, T, ...) are cut along dim 1. When gradients
    flow, each call runs under activation checkpointing: only its inputs are kept, and the
    backward pass recomputes what it made (the chunk's logits), one chunk at a time.
    """
    keep_for_backward = torch.is_grad_enabled() and hidden.requires_grad
    parts = []
    for start in range(0, hidden.shape[1], chunk_tokens):
        chunk = [x[:, start : start + chunk_tokens] for x in (hidden, *aligned)]
        if keep_for_backward:
            parts.append(torch.utils.checkpoint.checkpoint(compute, *chunk, use_reentrant=False))
        else:
            parts.append(compute(*chunk))
    return parts


def _chunk_stats(
    head: Any, hidden: torch.Tensor, targets: torch.Tensor, sampling: tuple[float, int, float], with_entropy: bool
) -> tuple[torch.Tensor, ...]:
    """Log-probs (B, c) and, when asked, entropies (B, c) of one chunk of hidden states (B, c, H)."""
    logprobs, entropy = _token_stats(head(hidden), targets, sampling, with_entropy)
    return (logprobs,) if entropy is None else (logprobs, entropy)


def _token_stats(
    logits: torch.Tensor, targets: torch.Tensor, sampling: tuple[float, int, float], with_entropy: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs (B, c) of ``targets`` (B, c) under ``logits`` (B, c, V) sampled as ``sampling``
    (temperature, top_k, top_p), and entropies."""
    temperature, top_k, top_p = sampling
    picked = logits.to(torch.promote_types(logits.dtype, torch.float32))  # half precision in fp32
    if temperature != 1.0:  # x / 1.0 is x: a pass over (B, c, V) saved, the same values
        picked = picked / temperature
    logprobs = truncated_logprobs(picked, targets, top_k, top_p)  # (B, c)
    entropy = None
    if with_entropy:
        log_p = torch.log_softmax(picked, dim=-1)
        entropy = -(log_p.exp() * log_p).sum(-1)
    return logprobs, entropy


def _predicting_positions(batch: TokenBatch, device: Any, width: int) -> torch.Tensor:
    """Gather indices (B, C, width) of the positions predicting each completion token.

    Position p predicts token p + 1: the completion of row b is predicted by positions
    prompt_len - 1 ... prompt_len + C - 2 (clamped to the sequence for padding).
    """
    columns = batch.completion_ids.shape[1]
    offsets = batch.prompt_lengths.to(device)[:, None] - 1 + torch.arange(columns, device=device)[None, :]  # (B, C)
    offsets = offsets.clamp(max=batch.input_ids.shape[1] - 1)
    return offsets[:, :, None].expand(-1, -1, width)


def _predicting_hidden(model: Any, batch: TokenBatch, device: Any) -> torch.Tensor:
    """The decoder's last hidden states (B, C, H) at the positions predicting each completion token."""
    input_ids, attention = batch.input_ids.to(device), batch.attention_mask.to(device)
    hidden = model.get_decoder()(input_ids=input_ids, attention_mask=attention).last_hidden_state  # (B, L, H)
    return hidden.gather(1, _predicting_positions(batch, device, hidden.shape[-1]))


def logits_are_head_of_decoder(model: Any) -> bool:
    """Whether the model's logits are its output embeddings applied to its decoder's last hidden
    state (true of Llama-family models, with or without LoRA; not of models that scale or cap them)."""
    config = getattr(model, "config", None)
    if any(getattr(config, name, None) for name in ("final_logit_softcapping", "logit_scale", "logits_scaling")):
        return False
    try:
        return model.get_decoder() is not None and model.get_output_embeddings() is not None
    except (AttributeError, NotImplementedError):
        return False


def enable_activation_checkpointing(model: Any) -> None:
    """Turn on the model's own activation checkpointing (the forward of models without a lean pass).

    Raises UserError when the model does not support it.
    """
    if not getattr(model, "supports_gradient_checkpointing", False):
        raise UserError(
            f"optim.activation_checkpointing: {type(model).__name__} does not support activation checkpointing; "
            "set optim.activation_checkpointing=false"
        )
    if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.x's name
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


def autocast_context(mode: str, device: Any) -> Any:
    """The context the training passes run in: bfloat16 autocast on ``device`` ("bfloat16") or none ("none")."""
    import contextlib

    if mode == "none":
        return contextlib.nullcontext()
    return torch.autocast(torch.device(device).type, dtype=torch.bfloat16)


def micro_batches(rows: int, size: int) -> list[slice]:
    """Consecutive row ranges of at most ``size`` covering ``range(rows)``."""
    return [slice(start, min(start + size, rows)) for start in range(0, rows, size)]


@torch.no_grad()
def logprobs_without_grad(
    model: Any,
    batch: TokenBatch,
    temperature: float,
    micro_batch_size: int,
    lean: LeanDecoder | None = None,
    chunk_tokens: int = 0,
    autocast: str = "none",
    top_k: int = 0,
    top_p: float = 1.0,
) -> torch.Tensor:
    """Log-probs (B, C) of each completion token under ``model``, on the CPU, computed without
    grad ``micro_batch_size`` rows at a time (the reference pass and the recompute pass);
    ``chunk_tokens``, ``autocast``, ``top_k`` and ``top_p`` as in ``completion_logprobs``."""
    parts = [
        completion_logprobs(
            model,
            batch.select(rows),
            temperature,
            lean=lean,
            chunk_tokens=chunk_tokens,
            autocast=autocast,
            top_k=top_k,
            top_p=top_p,
        )[0].cpu()
        for rows in micro_batches(len(batch), micro_batch_size)
    ]
    return torch.cat(parts) if parts else torch.zeros_like(batch.sampler_logprobs)


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
