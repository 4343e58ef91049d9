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
    packed: bool = False,
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

    ``packed`` computes only the rows' real tokens, without their padding: the model's own
    forward runs the rows end to end as one sequence (``_packed_model_hidden``), the lean pass
    runs its token-wise work unpadded (``LeanDecoder.forward_prefixed(unpadded=True)``), and the
    vocabulary head sees only real completion positions. The same values to float rounding;
    entries past each row's completion are 0 instead of unspecified.
    """
    device = next(model.parameters()).device
    with autocast_context(autocast, device):
        sampling = (temperature, top_k, top_p)
        if packed:

            def stats(head: Any, hidden: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, ...]:
                return _head_stats(head, hidden, targets, sampling, with_entropy, chunk_tokens)

            return _packed_completion_logprobs(model, batch, lean, checkpoint_layers, stats)
        return _completion_logprobs(model, batch, sampling, with_entropy, lean, chunk_tokens, checkpoint_layers)


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
    return _head_stats(head, hidden, targets, sampling, with_entropy, chunk_tokens)


def _head_stats(
    head: Any,
    hidden: torch.Tensor,
    targets: torch.Tensor,
    sampling: tuple[float, int, float],
    with_entropy: bool,
    chunk_tokens: int,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs (B, C) and entropies of ``targets`` (B, C) from the hidden states (B, C, H) predicting
    them (``sampling``: temperature, top_k, top_p), ``chunk_tokens`` positions at a time when > 0."""
    if chunk_tokens <= 0:
        return _token_stats(head(hidden), targets, sampling, with_entropy)

    def stats(hidden_chunk: torch.Tensor, target_chunk: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return _chunk_stats(head, hidden_chunk, target_chunk, sampling, with_entropy)

    parts = over_position_chunks(stats, hidden, targets, chunk_tokens=chunk_tokens)
    logprobs = torch.cat([p[0] for p in parts], dim=1)  # (B, C)
    return logprobs, torch.cat([p[1] for p in parts], dim=1) if with_entropy else None


def _packed_completion_logprobs(
    model: Any, batch: TokenBatch, lean: LeanDecoder | None, checkpoint_layers: bool, stats: Any
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``completion_logprobs`` with ``packed``: the m real completion positions of the rows, in row
    order, go through the head as one (1, m) sequence (``stats(head, hidden, targets)``: log-probs
    and entropies); their values are put back in (B, C)."""
    device = next(model.parameters()).device
    completion_lengths = batch.attention_mask.sum(1) - batch.prompt_lengths  # (B,)
    real = torch.arange(batch.completion_ids.shape[1])[None, :] < completion_lengths[:, None]  # (B, C)
    real = real.to(device)
    if lean is not None:
        hidden = lean.forward_prefixed(
            *_shared_prompts(batch, device), head=False, checkpoint_layers=checkpoint_layers, unpadded=True
        )[real]  # (m, H)
        head = lean.head
    else:
        hidden, head = _packed_model_hidden(model, batch, device, completion_lengths)
    targets = batch.completion_ids.to(device)[real]  # (m,)
    logprobs, entropy = stats(head, hidden[None], targets[None])

    def unpacked(values: torch.Tensor) -> torch.Tensor:
        """(1, m) -> (B, C), zeros past each completion."""
        return torch.zeros(real.shape, dtype=values.dtype, device=device).masked_scatter(real, values[0])

    return unpacked(logprobs), None if entropy is None else unpacked(entropy)


def _packed_model_hidden(
    model: Any, batch: TokenBatch, device: Any, completion_lengths: torch.Tensor
) -> tuple[torch.Tensor, Any]:
    """The model's own forward over the rows packed into one sequence (1, n) of their real tokens:
    positions restart at 0 on each row and a block-diagonal causal mask (1, 1, n, n) keeps each
    token to its own row. Returns the outputs at the m positions predicting completion tokens
    (m, H) in row order, and the head that turns them into logits (the identity when they are
    logits already: models whose logits are not their head of the decoder's state)."""
    lengths = batch.attention_mask.sum(1)  # (B,)
    ids = batch.input_ids[batch.attention_mask.bool()].to(device)  # (n,) rows end to end
    starts = torch.cumsum(lengths, 0) - lengths  # (B,) where each row begins
    row = torch.repeat_interleave(torch.arange(len(lengths)), lengths)  # (n,)
    positions = (torch.arange(int(lengths.sum())) - starts[row]).to(device)  # (n,) 0 at each row's start
    row = row.to(device)
    causal = torch.ones(len(row), len(row), dtype=torch.bool, device=device).tril()
    mask = (causal & (row[:, None] == row[None, :]))[None, None]  # (1, 1, n, n)
    # Completion token j of row b is predicted by the row's position prompt_length + j - 1.
    predicting = torch.cat(
        [torch.arange(n) + start + p - 1 for n, start, p in zip(completion_lengths, starts, batch.prompt_lengths)]
    ).to(device)  # (m,)
    inputs = {"input_ids": ids[None], "position_ids": positions[None], "attention_mask": mask}
    if logits_are_head_of_decoder(model):
        hidden = model.get_decoder()(**inputs).last_hidden_state[0]  # (n, H)
        return hidden[predicting], model.get_output_embeddings()
    return model(**inputs).logits[0][predicting], lambda logits: logits


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


def token_budget_micro_batches(lengths: Sequence[int], max_rows: int, max_tokens: int) -> list[slice]:
    """Consecutive row ranges covering the rows, each of at most ``max_rows`` rows whose ``lengths``
    (tokens) sum to at most ``max_tokens``; a row longer than ``max_tokens`` is a range of its own.

    Rows stay in order, so a group's samples (which share their prompt) stay together."""
    ranges, start, used = [], 0, 0
    for row, length in enumerate(lengths):
        if row > start and (used + length > max_tokens or row - start == max_rows):
            ranges.append(slice(start, row))
            start, used = row, 0
        used += length
    if start < len(lengths):
        ranges.append(slice(start, len(lengths)))
    return ranges


def micro_batch_plan(batch: TokenBatch, max_rows: int, max_tokens: int) -> list[slice]:
    """The micro-batches of ``batch``: by token budget when ``max_tokens`` > 0 (sequence packing),
    else ``max_rows`` rows at a time."""
    if max_tokens <= 0:
        return micro_batches(len(batch), max_rows)
    return token_budget_micro_batches(batch.attention_mask.sum(1).tolist(), max_rows, max_tokens)


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
    max_tokens: int = 0,
) -> torch.Tensor:
    """Log-probs (B, C) of each completion token under ``model``, on the CPU, computed without
    grad ``micro_batch_size`` rows at a time (the reference pass and the recompute pass), or
    packed by ``max_tokens`` when > 0 (``micro_batch_plan``); ``chunk_tokens``, ``autocast``,
    ``top_k`` and ``top_p`` as in ``completion_logprobs``."""
    packed = max_tokens > 0
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
            packed=packed,
        )[0].cpu()
        for rows in micro_batch_plan(batch, micro_batch_size, max_tokens)
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
