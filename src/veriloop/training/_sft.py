"""Supervised fine-tuning on chat conversations, with the loss on assistant tokens only.

Conversations are tokenized the way rollouts build sequences (template applied to the prompt
once, each assistant message followed by the end-of-turn token, observations rendered by the
template in between), so a model trained here sees at rollout exactly the token layout it
learned from.

Data-parallel (N ranks, ``_distributed.py``): every rank draws the same batch, computes the loss
on its contiguous share of it, weighted by its share of the batch's assistant tokens counted over
all ranks, and the gradients are summed across ranks: the update of one process on the whole
batch. Under ``distributed.strategy=fsdp`` (``_parallel_strategy.py``) the parameters, gradients
and AdamW state are sharded and each rank's one pass a step enters the FSDP unit. Rank 0 saves
the model.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from veriloop.rollout import LeanDecoder, observation_ids


def tokenize_conversation(tokenizer: Any, messages: Sequence[dict[str, str]]) -> tuple[list[int], list[int]]:
    """Token ids of a conversation and its loss mask (1 on assistant tokens and their end token).

    The conversation starts with one or more non-assistant messages.
    """
    messages = list(messages)
    first = next((i for i, m in enumerate(messages) if m["role"] == "assistant"), None)
    if first is None or first == 0:
        raise ValueError("a training conversation needs a prompt followed by an assistant message")
    ids = list(_template_ids(tokenizer, messages[:first]))
    mask = [0] * len(ids)
    index = first
    while index < len(messages):
        content = messages[index]["content"]
        turn = list(tokenizer.encode(content, add_special_tokens=False)) + [tokenizer.eos_token_id]
        ids += turn
        mask += [1] * len(turn)
        end = index + 1
        while end < len(messages) and messages[end]["role"] != "assistant":
            end += 1
        if end > index + 1:
            observed = observation_ids(tokenizer, messages[: index + 1], messages[index + 1 : end])
            ids += observed
            mask += [0] * len(observed)
        index = end
    return ids, mask


def _template_ids(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    out = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    return list(out["input_ids"] if hasattr(out, "keys") else out)


@dataclass(frozen=True)
class SFTStep:
    step: int
    loss: float
    tokens: int


def sft_loss(
    model: Any, batch: Sequence[tuple[list[int], list[int]]], pad_id: int, lean: Any = None, chunk_tokens: int = 0
) -> tuple[Any, int]:
    """Mean cross-entropy over assistant tokens of a right-padded batch; returns (loss, tokens).

    ``lean`` (a LeanDecoder over ``model``) computes the same logits faster. ``chunk_tokens`` > 0
    computes the vocabulary logits that many positions at a time, recomputing each chunk's in the
    backward pass (``over_position_chunks``), so (B, T, V) never exists at once; the same loss.
    """
    import torch

    from veriloop.training._batch import logits_are_head_of_decoder, over_position_chunks

    width = max(len(ids) for ids, _ in batch)
    input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    labels = torch.full((len(batch), width), -100, dtype=torch.long)
    attention = torch.zeros((len(batch), width), dtype=torch.long)
    for row, (ids, mask) in enumerate(batch):
        input_ids[row, : len(ids)] = torch.tensor(ids)
        attention[row, : len(ids)] = 1
        labels[row, : len(ids)] = torch.tensor([t if m else -100 for t, m in zip(ids, mask)])
    device = next(model.parameters()).device
    input_ids, attention = input_ids.to(device), attention.to(device)
    targets = labels[:, 1:].to(device)  # (B, T-1) next-token targets, -100 off the assistant turns
    tokens = int((targets != -100).sum())
    positions = torch.arange(width, device=device).expand_as(input_ids)
    if chunk_tokens <= 0 or (lean is None and not logits_are_head_of_decoder(model)):
        if lean is not None:
            logits = lean.forward(input_ids, positions, attention.bool())[:, :-1]  # (B, T-1, V)
        else:
            logits = model(input_ids=input_ids, attention_mask=attention).logits[:, :-1]  # (B, T-1, V)
        return _cross_entropy(logits, targets, "mean"), tokens
    if lean is not None:
        hidden = lean.forward(input_ids, positions, attention.bool(), head=False)[:, :-1]  # (B, T-1, H)
        head = lean.head
    else:
        hidden = model.get_decoder()(input_ids=input_ids, attention_mask=attention).last_hidden_state[:, :-1]
        head = model.get_output_embeddings()

    def summed(hidden_chunk: Any, target_chunk: Any) -> tuple[Any]:
        return (_cross_entropy(head(hidden_chunk), target_chunk, "sum"),)

    parts = over_position_chunks(summed, hidden, targets, chunk_tokens=chunk_tokens)
    return sum(p[0] for p in parts) / max(tokens, 1), tokens


def _cross_entropy(logits: Any, targets: Any, reduction: str) -> Any:
    """Cross-entropy of ``targets`` (B, T) under ``logits`` (B, T, V), in fp32, -100 ignored."""
    import torch

    flat = logits.float().reshape(-1, logits.shape[-1])
    return torch.nn.functional.cross_entropy(flat, targets.reshape(-1), ignore_index=-100, reduction=reduction)


def train_sft(
    model: Any,
    tokenizer: Any,
    conversations: Sequence[Sequence[dict[str, str]]],
    *,
    steps: int,
    batch_size: int = 16,
    lr: float = 1e-3,
    warmup_steps: int = 10,
    seed: int = 0,
    on_step: Callable[[SFTStep], None] | None = None,
    chunk_tokens: int = 0,
    ranks: Any = None,
    strategy: Any = "auto",
) -> list[SFTStep]:
    """Train ``model`` in place for ``steps`` optimizer steps on shuffled conversations
    (``chunk_tokens`` as in ``sft_loss``). ``ranks``: the data-parallel group this process is a
    rank of (``_distributed.process_group_for``); None trains alone. ``strategy``: the
    ``distributed.strategy`` over those ranks, or one ``strategy_for`` made for ``model`` (fsdp
    shards ``model`` in place; its full weights are gathered back into it at the end). ``SFTStep.loss`` and ``tokens`` are the whole batch's."""
    import torch

    from veriloop.training._distributed import SingleProcess
    from veriloop.training._parallel_strategy import strategy_for

    ranks = ranks if ranks is not None else SingleProcess()
    if batch_size < ranks.world_size:
        raise ValueError(f"batch_size {batch_size} gives some of the {ranks.world_size} ranks no conversation")

    examples = [tokenize_conversation(tokenizer, c) for c in conversations]
    if not examples:
        raise ValueError("no conversations to train on")
    rng = random.Random(seed)
    torch.manual_seed(seed)
    device = str(next(model.parameters()).device)
    parallel = strategy_for(strategy, ranks, model, device) if isinstance(strategy, str) else strategy
    parameters = list(model.parameters())  # fsdp: this rank's shards
    optimizer = torch.optim.AdamW(parameters, lr=lr, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / max(warmup_steps, 1)))
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    lean = parallel.lean or (LeanDecoder(model) if LeanDecoder.supports(model) else None)
    order: list[int] = []
    history = []
    model.train()
    for step in range(steps):
        if len(order) < batch_size:
            fresh = list(range(len(examples)))
            rng.shuffle(fresh)
            order += fresh
        batch = [examples[i] for i in order[:batch_size]]
        del order[:batch_size]
        share = ranks.share(len(batch))
        loss, tokens = sft_loss(model, batch[share.start : share.stop], pad_id, lean, chunk_tokens)
        (total_tokens,) = ranks.total([tokens])
        optimizer.zero_grad(set_to_none=True)
        # This share's token-weighted part of the whole batch's mean (the mean itself in one process).
        (loss * (tokens / max(total_tokens, 1.0))).backward()
        parallel.reduce_gradients(parameters)
        torch.nn.utils.clip_grad_norm_(parameters, 1.0)
        optimizer.step()
        schedule.step()
        (loss_sum,) = ranks.total([float(loss.detach()) * tokens])
        record = SFTStep(step=step, loss=loss_sum / max(total_tokens, 1.0), tokens=int(total_tokens))
        history.append(record)
        if on_step is not None:
            on_step(record)
    parallel.gather_weights()
    model.eval()
    return history


def read_conversations(path: str) -> list[list[dict[str, str]]]:
    """Chat-format training data (what ``trajectories export --sft`` writes); every bad line reported."""
    from pydantic import BaseModel, ConfigDict

    from veriloop.core import Message, read_records

    class Conversation(BaseModel):
        model_config = ConfigDict(extra="ignore", frozen=True)
        messages: tuple[Message, ...]

    rows = read_records(path, Conversation)
    return [[m.model_dump() for m in row.messages] for row in rows]


def run_sft(config: Any, on_step: Callable[[SFTStep], None] | None = None) -> list[SFTStep]:
    """``veriloop sft``: load the model, train on the conversations, save to ``run.out``."""
    from pathlib import Path

    from veriloop.core import RowErrors, UserError
    from veriloop.training._distributed import process_group_for
    from veriloop.training._model import load_policy, save_final
    from veriloop.training._parallel_strategy import strategy_for

    if not config.data.train:
        raise UserError("data.train: give the chat-format JSONL file to train on")
    conversations = read_conversations(config.data.train)
    problems = [
        f"{config.data.train}: row {index}: a conversation needs a prompt, then an assistant message"
        for index, conversation in enumerate(conversations, start=1)
        if "assistant" not in [m["role"] for m in conversation] or conversation[0]["role"] == "assistant"
    ]
    if problems:
        raise RowErrors(problems)
    ranks = process_group_for(config.distributed, config.model.device)
    if config.optim.batch_size < ranks.world_size:
        raise UserError(f"optim.batch_size: {config.optim.batch_size} is below the {ranks.world_size} ranks")
    model, tokenizer = load_policy(config.model)
    parallel = strategy_for(config.distributed.strategy, ranks, model, config.model.device)
    history = train_sft(
        model,
        tokenizer,
        conversations,
        steps=config.optim.steps,
        batch_size=config.optim.batch_size,
        lr=config.optim.lr,
        warmup_steps=config.optim.warmup_steps,
        seed=config.run.seed,
        on_step=on_step,
        chunk_tokens=config.optim.logit_chunk_tokens,
        ranks=ranks,
        strategy=parallel,
    )
    if ranks.is_main:
        save_final(model, tokenizer, Path(config.run.out), parallel.model_state(model))
    ranks.close()
    return history
