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

Checkpoints (``run.checkpoint_every``) are the RL trainer's format (``_checkpoint.py``): weights,
AdamW state (whole, whatever the strategy), scheduler, RNG state and the data cursor (the
shuffler's state and the conversations still to come in its current pass), so rerunning the
command resumes the run, at any world size.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
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


@dataclass(frozen=True)
class SFTCheckpoints:
    """Where ``train_sft`` saves resumable checkpoints, how often, and how many it keeps."""

    root: Path
    every: int  # optimizer steps between checkpoints; one is also saved after the last step
    keep: int = 2

    def latest(self) -> Path | None:
        from veriloop.training._checkpoint import list_checkpoints

        found = list_checkpoints(self.root)
        return found[-1] if found else None


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
    checkpoints: SFTCheckpoints | None = None,
) -> list[SFTStep]:
    """Train ``model`` in place for ``steps`` optimizer steps on shuffled conversations
    (``chunk_tokens`` as in ``sft_loss``). ``ranks``: the data-parallel group this process is a
    rank of (``_distributed.process_group_for``); None trains alone. ``strategy``: the
    ``distributed.strategy`` over those ranks, or one ``strategy_for`` made for ``model`` (fsdp
    shards ``model`` in place; its full weights are gathered back into it at the end).
    ``checkpoints``: save there, and resume from the latest one, whose weights ``model`` must
    already hold (``run_sft`` loads them); the history then starts at the resumed step.
    ``SFTStep.loss`` and ``tokens`` are the whole batch's."""
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
    start = 0
    resume_from = checkpoints.latest() if checkpoints is not None else None
    if resume_from is not None:
        start, order = _resume(resume_from, parallel, optimizer, schedule, rng)
    history = []
    model.train()
    for step in range(start, steps):
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
        if checkpoints is not None and ((step + 1) % checkpoints.every == 0 or step + 1 == steps):
            cursor = {"order": list(order), "shuffler": rng.getstate()}
            _save(checkpoints, step + 1, model, tokenizer, parallel, (optimizer, schedule), cursor)
    parallel.gather_weights()
    model.eval()
    return history


def _save(
    checkpoints: SFTCheckpoints,
    step: int,
    model: Any,
    tokenizer: Any,
    parallel: Any,
    optimization: tuple[Any, Any],
    cursor: dict[str, Any],
) -> None:
    """The checkpoint after ``step`` steps (``optimization``: the optimizer and its schedule); every
    rank takes part (fsdp gathers the weights and the optimizer state), rank 0 writes."""
    from veriloop.training._checkpoint import save_checkpoint

    optimizer, schedule = optimization
    parallel.gather_weights()
    optimizer_state = parallel.optimizer_state(optimizer)
    if parallel.ranks.is_main:
        weights = parallel.model_state(model)
        save_checkpoint(
            checkpoints.root, step, model, tokenizer, optimizer_state, schedule, cursor, {}, checkpoints.keep, weights
        )


def _resume(
    checkpoint: Path, parallel: Any, optimizer: Any, schedule: Any, shuffler: random.Random
) -> tuple[int, list[int]]:
    """Load a checkpoint's optimizer, schedule, RNG and data cursor into the run; the step it was
    saved after and the conversations still to come in the shuffler's current pass."""
    from veriloop.core import UserError
    from veriloop.training._checkpoint import load_trainer_state, set_rng_state

    state = load_trainer_state(checkpoint)
    if set(state["sampler"]) != {"order", "shuffler"}:
        raise UserError(f"{checkpoint}: not a checkpoint of an SFT run (an RL run's?); use another run.out")
    parallel.load_optimizer_state(optimizer, state["optimizer"])
    schedule.load_state_dict(state["scheduler"])
    set_rng_state(state["rng"])
    shuffler.setstate(state["sampler"]["shuffler"])
    return state["step"], list(state["sampler"]["order"])


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
    """``veriloop sft``: load the model, train on the conversations, save to ``run.out``; with
    ``run.checkpoint_every``, checkpoints go to ``run.out/checkpoints`` and a rerun resumes."""
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
    run = config.run
    checkpoints = (
        SFTCheckpoints(Path(run.out) / "checkpoints", run.checkpoint_every, run.keep_checkpoints)
        if run.checkpoint_every
        else None
    )
    resume_from = checkpoints.latest() if checkpoints is not None else None
    model, tokenizer = load_policy(config.model, resume_from / "model" if resume_from else None)
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
        checkpoints=checkpoints,
    )
    if ranks.is_main:
        save_final(model, tokenizer, Path(config.run.out), parallel.model_state(model))
    ranks.close()
    return history
