"""The ``hf`` engine: batched sampling with a KV cache on any transformers causal LM.

The sampling loop is our own rather than ``model.generate`` so that it can (a) report the
log-prob of every sampled token, (b) give every sample its own random stream, so a sample
depends on its seed and not on which other requests shared its batch, (c) drop finished rows
from the KV cache as it goes, (d) stop rows that loop, (e) prefill a prompt shared by
several rows (a group) once, and (f) keep a conversation's keys and values between its turns
(``_kv_sessions``), so a next turn prefills only its new tokens. ``bench/generate.py``
measures it against ``model.generate`` on the same model and batch; ``bench/multiturn.py``
measures (f) against re-prefilling every turn.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from veriloop.core import UserError, ensure_strict_blas
from veriloop.rollout._engine import (
    ENGINES,
    Prompt,
    encode_chat_or_ids,
    eos_token_ids,
    gather_requests,
    settle_batch,
)
from veriloop.rollout._kv_sessions import KVSessions, LayerKV
from veriloop.rollout._lean import LeanDecoder, sampling_precision
from veriloop.rollout._sampling import Sample, SamplingParams, truncation_mask
from veriloop.rollout._stopping import repeating_block

_Row = tuple[Sequence[int], int | None, str | None]  # prompt ids, seed, session
_STOP_TAIL_TOKENS = 16  # tokens decoded to look for a stop string that may span tokens


def quiet_transformers() -> None:
    """Turn off transformers' own progress bars: veriloop shows its own."""
    from transformers.utils import logging

    logging.disable_progress_bar()


def load_model_and_tokenizer(model: str | Path, device: str = "cpu", dtype: str = "auto") -> tuple[Any, Any]:
    """Load a local HF model directory; a missing or unreadable directory is a UserError."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    quiet_transformers()
    path = Path(model)
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise UserError(
            f"--device {device}: this torch has no CUDA device (torch {torch.__version__}); use --device cpu"
        )
    if not (path / "config.json").is_file():
        raise UserError(f"{path}: not a model directory (no config.json)")
    if dtype not in ("auto", "float32", "bfloat16", "float16"):
        raise UserError(f"dtype {dtype!r}: use auto, float32, bfloat16 or float16")
    if dtype == "auto":
        use_bf16 = device.startswith("cuda") and torch.cuda.is_available() and torch.cuda.is_bf16_supported()
        torch_dtype = torch.bfloat16 if use_bf16 else torch.float32
    else:
        torch_dtype = getattr(torch, dtype)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
        loaded = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype).to(device)
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: could not load the model: {exc}") from None
    loaded.eval()
    return loaded, tokenizer


class HFEngine:
    """Token-level engine over a transformers model (CPU or GPU).

    ``model`` is a local directory or an already loaded model (then ``tokenizer`` is required;
    a trainer passes its own model so that weight sync is free). With ``kv_reuse``, requests
    that name a session continue from the keys and values the session's previous turn left
    (at most ``kv_session_mb`` MiB kept over all sessions, least recently used evicted).
    With ``midway_weights`` set (partial rollouts), weights published while a batch decodes are
    loaded between two decode steps, and its unfinished rows go on with them: their contexts
    (prompt and tokens so far) are prefilled again under the new weights, so each token's
    log-prob is one policy version's exactly, and each token is tagged with its version
    (``Sample.versions``).
    ``sample_dtype`` ("bfloat16", "float32"; default: the model's own) samples from a snapshot
    of the weights in that precision, taken at each batch (a float32 policy sampled in bfloat16
    decodes several times faster on CPUs with bfloat16 matrix units; its log-probs are those of
    the bfloat16 forward, the distribution that was sampled). It needs the lean forward.
    """

    name = "hf"

    def __init__(
        self,
        model: str | Path | Any,
        tokenizer: Any | None = None,
        device: str = "cpu",
        dtype: str = "auto",
        max_batch_size: int = 64,
        lean: bool = True,
        kv_reuse: bool = True,
        kv_session_mb: int = 2048,
        sample_dtype: str | None = None,
    ):
        self.blas = ensure_strict_blas()  # before the first matrix product: samples must not depend on their batch
        if isinstance(model, (str, Path)):
            model, loaded_tokenizer = load_model_and_tokenizer(model, device, dtype)
            tokenizer = tokenizer or loaded_tokenizer
        if tokenizer is None:
            raise ValueError("an in-memory model needs its tokenizer")
        self.model = model
        self._tokenizer = tokenizer
        # The lean forward when the architecture allows it; the model's own forward otherwise.
        self.lean = LeanDecoder(model) if lean and LeanDecoder.supports(model) else None
        self.sample_dtype = sampling_precision(model, sample_dtype, self.lean)
        self.max_batch_size = max_batch_size
        self.policy_version = 0
        self.busy_s = 0.0  # wall seconds spent sampling, summed over batches (utilisation metrics)
        self.prefill_tokens = 0  # tokens run through prefill forwards, summed over batches
        self.kv_reuse = kv_reuse
        self.sessions = KVSessions(kv_session_mb * 2**20)
        self._lock = threading.Lock()  # one forward pass at a time on the shared model
        # Partial rollouts: asked between decode steps for (version, weights) published since the
        # batch began (None: nothing new); a batch that gets some goes on with them.
        self.midway_weights: Callable[[], tuple[int, dict[str, Any] | None] | None] | None = None
        self._batcher: _Batcher | None = None
        generation_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
        self.eos_token_ids = eos_token_ids(tokenizer, generation_eos)
        self.pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else min(self.eos_token_ids)

    @property
    def tokenizer(self) -> Any:
        return self._tokenizer

    @property
    def context_length(self) -> int | None:
        """Positions the model was built for (prompt and completion together); None if unknown."""
        return getattr(self.model.config, "max_position_embeddings", None)

    def encode_prompt(self, prompt: Prompt) -> list[int]:
        """Token ids of a prompt: ids pass through; chat messages get the chat template once."""
        return encode_chat_or_ids(self._tokenizer, prompt)

    @property
    def keeps_sessions(self) -> bool:
        """Whether ``generate``/``agenerate`` honour ``sessions`` (see ``Engine``)."""
        return self.kv_reuse

    def generate(
        self, prompts: Sequence[Prompt], params: SamplingParams, sessions: Sequence[str | None] | None = None
    ) -> list[list[Sample]]:
        rows = self._rows(prompts, params, sessions)
        samples: list[Sample] = []
        for start in range(0, len(rows), self.max_batch_size):
            samples += self.sample_rows(rows[start : start + self.max_batch_size], params)
        return [samples[i * params.n : (i + 1) * params.n] for i in range(len(prompts))]

    async def agenerate(
        self, prompts: Sequence[Prompt], params: SamplingParams, sessions: Sequence[str | None] | None = None
    ) -> list[list[Sample]]:
        if self._batcher is None or self._batcher.loop is not asyncio.get_running_loop():
            self._batcher = _Batcher(self)
        return await self._batcher.submit(self._rows(prompts, params, sessions), params)

    def end_session(self, session: str) -> None:
        """Drop what ``session`` kept (its conversation is over)."""
        with self._lock:
            self.sessions.release(session)

    def _rows(
        self, prompts: Sequence[Prompt], params: SamplingParams, sessions: Sequence[str | None] | None
    ) -> list[_Row]:
        """One (prompt ids, seed, session) row per sample."""
        if sessions is not None and (len(sessions) != len(prompts) or params.n != 1):
            raise ValueError("sessions: one per prompt, and only with n=1 (the samples of a prompt would diverge)")
        rows = []
        for i, prompt in enumerate(prompts):
            ids = self.encode_prompt(prompt)
            session = sessions[i] if sessions is not None else None
            rows += [(ids, None if params.seed is None else params.seed + j, session) for j in range(params.n)]
        return rows

    def update_weights(self, state_dict: dict[str, Any] | None, version: int) -> None:
        """Load ``state_dict`` (every weight, or a subset such as a trainer's trainable ones) and
        tag later samples with ``version``; a name the model lacks is an error."""
        with self._lock:
            self._load_weights(state_dict, version)

    def _load_weights(self, state_dict: dict[str, Any] | None, version: int) -> None:
        """``update_weights`` under the lock its caller holds."""
        if state_dict:
            unexpected = self.model.load_state_dict(state_dict, strict=False).unexpected_keys
            if unexpected:
                raise KeyError(f"weights the rollout model does not have: {', '.join(sorted(unexpected)[:5])}")
        self.policy_version = version
        self.sessions.clear()  # keys and values of the old weights

    def _swap_midway(self) -> bool:
        """Partial rollouts: load the weights ``midway_weights`` has for us, between two decode
        steps of a running batch; whether any were loaded."""
        pending = self.midway_weights() if self.midway_weights is not None else None
        if pending is None:
            return False
        version, state_dict = pending
        self._load_weights(state_dict, version)
        return True

    def close(self) -> None:
        self._batcher = None
        self.sessions.clear()

    def sample_rows(
        self, rows: Sequence[tuple[Any, ...]], params: SamplingParams, max_tokens: Sequence[int] | None = None
    ) -> list[Sample]:
        """Sample one continuation per (prompt ids, seed[, session]) row, all in one batch; row i
        generates ``max_tokens[i]`` new tokens at most (default: ``params.max_tokens`` each)."""
        limits = list(max_tokens) if max_tokens is not None else [params.max_tokens] * len(rows)
        if len(limits) != len(rows) or min(limits, default=1) < 1:
            raise ValueError("max_tokens: one budget >= 1 per row")
        with self._lock:
            started = time.perf_counter()
            try:
                return _sample_batch(self, [(*row, None)[:3] for row in rows], params, limits)
            finally:
                self.busy_s += time.perf_counter() - started


@dataclass
class _Prefill:
    """What a batch prefills: each distinct item once (a group's shared prompt, a session's new tokens).

    Item i continues ``reused_mask[i].sum()`` tokens whose keys and values a session kept;
    they sit right-aligned in the first C cache slots, the item's new tokens after them.
    """

    input_ids: Any  # (P, S) new tokens, left-padded
    attention: Any  # (P, S) 1 on real new tokens
    positions: Any  # (P, S) positions of the new tokens in their sequence
    reused_mask: Any  # (P, C) bool, slots holding reused keys and values
    reused: tuple[LayerKV, ...]  # per layer (P, kv_heads, C, head_dim); empty when C == 0
    row_item: Any  # (B,) the item of each row


def _plan_prefill(engine: HFEngine, rows: Sequence[_Row], device: Any) -> _Prefill:
    import torch

    items: dict[tuple[str | None, tuple[int, ...]], int] = {}
    reuse: list[tuple[int, tuple[LayerKV, ...]]] = []
    row_item = []
    for ids, _, session in rows:
        kept, layers = engine.sessions.reusable(session, ids, engine.policy_version) if engine.kv_reuse else (0, ())
        key = (session if kept else None, tuple(ids))
        if key not in items:
            items[key] = len(items)
            reuse.append((kept, layers))
        row_item.append(items[key])
    suffixes = [ids[kept:] for (_, ids), (kept, _) in zip(items, reuse)]
    width, reused_width = max(len(s) for s in suffixes), max(kept for kept, _ in reuse)
    input_ids = torch.full((len(items), width), engine.pad_token_id, dtype=torch.long)
    attention = torch.zeros((len(items), width), dtype=torch.long)
    reused_mask = torch.zeros((len(items), reused_width), dtype=torch.bool)
    for i, suffix in enumerate(suffixes):  # left padding
        input_ids[i, width - len(suffix) :] = torch.tensor(suffix, dtype=torch.long)
        attention[i, width - len(suffix) :] = 1
        reused_mask[i, reused_width - reuse[i][0] :] = True
    kept_counts = torch.tensor([kept for kept, _ in reuse])[:, None]
    positions = kept_counts + (attention.cumsum(-1) - 1).clamp(min=0)  # (P, S)
    reused: tuple[LayerKV, ...] = ()
    if reused_width:
        like = next(layers for kept, layers in reuse if kept)
        reused = tuple(
            (
                key.new_zeros((len(items), *key.shape[:1], reused_width, *key.shape[2:])),
                value.new_zeros((len(items), *value.shape[:1], reused_width, *value.shape[2:])),
            )
            for key, value in like
        )
        for i, (kept, layers) in enumerate(reuse):
            for (key_slots, value_slots), (key, value) in zip(reused, layers):
                key_slots[i, :, reused_width - kept :] = key
                value_slots[i, :, reused_width - kept :] = value
    return _Prefill(
        input_ids.to(device),
        attention.to(device),
        positions.to(device),
        reused_mask.to(device),
        tuple((k.to(device), v.to(device)) for k, v in reused),
        torch.tensor(row_item, device=device),
    )


class _HFStepper:
    """Prefill and decode through the model itself, with a transformers KV cache."""

    def __init__(self, model: Any):
        from transformers import DynamicCache

        self.model = model
        self.cache = DynamicCache()
        self.cache_arg = _cache_argument(model)

    def prefill(self, plan: _Prefill, max_new: int) -> Any:
        """Last-position logits (B, V) of each row's prompt; every row runs its own prefill."""
        import torch

        rows = plan.row_item
        self.attention = torch.cat([plan.reused_mask.long(), plan.attention], dim=1)[rows]  # (B, C + S)
        for layer, (key, value) in enumerate(plan.reused):
            self.cache.update(key[rows], value[rows], layer)
        self.prefilled_tokens = int(plan.attention[rows].sum())
        out = self.model(
            input_ids=plan.input_ids[rows],
            attention_mask=self.attention,
            position_ids=plan.positions[rows],
            use_cache=True,
            **{self.cache_arg: self.cache},
        )
        return out.logits[:, -1, :]

    def decode(self, tokens: Any, positions: Any) -> Any:
        import torch

        self.attention = torch.cat([self.attention, torch.ones_like(self.attention[:, :1])], dim=-1)
        out = self.model(
            input_ids=tokens[:, None],
            attention_mask=self.attention,
            position_ids=positions,
            use_cache=True,
            **{self.cache_arg: self.cache},
        )
        return out.logits[:, -1, :]

    def select(self, index: Any) -> None:
        self.cache.batch_select_indices(index)
        self.attention = self.attention[index]

    def kept(self, row: int) -> list[LayerKV]:
        """Keys and values (kv_heads, T, head_dim) per layer of the T tokens cache row ``row`` has run."""
        real = self.attention[row].nonzero()[:, 0]  # (T,) slots holding real tokens
        return [
            (layer.keys[row].index_select(1, real), layer.values[row].index_select(1, real))
            for layer in self.cache.layers
        ]

    def close(self) -> None:
        self.cache = None


class _LeanStepper:
    """Prefill and decode through ``LeanDecoder`` with a preallocated KV cache."""

    def __init__(self, lean: LeanDecoder, dtype: Any = None):
        self.lean = lean
        lean.fuse(dtype)  # the weights may have changed since the last batch

    def close(self) -> None:
        self.lean.unfuse()

    def prefill(self, plan: _Prefill, max_new: int) -> Any:
        """Each distinct item (P, S) once, after its reused keys and values; its rows (B,) then
        copy its KV cache.

        The LM head runs on the B rows, as in decode steps: a sample's numbers do not depend
        on how many prompts shared its batch (small matmuls take other BLAS paths).
        """
        import torch

        items, width = plan.input_ids.shape
        reused = plan.reused_mask.shape[1]
        self.slot = reused + width
        self.key_mask = torch.cat(
            [plan.reused_mask, plan.attention.bool(), plan.attention.new_ones((items, max_new), dtype=torch.bool)],
            dim=1,
        )
        self.cache = self.lean.new_cache(items, self.slot + max_new)
        for (key_cache, value_cache), (key, value) in zip(self.cache, plan.reused):
            key_cache[:, :, :reused] = key
            value_cache[:, :, :reused] = value
        self.prefilled_tokens = int(plan.attention.sum())
        hidden = self.lean.forward(
            plan.input_ids,
            plan.positions,
            self.key_mask[:, : self.slot],
            self.cache,
            reused,
            last_only=True,
            head=False,
        )  # (P, 1, H)
        rows = plan.row_item
        if items < len(rows):
            self.select(rows)
        return self.lean.head(hidden[rows, -1])

    def decode(self, tokens: Any, positions: Any) -> Any:
        logits = self.lean.forward(
            tokens[:, None], positions, self.key_mask[:, : self.slot + 1], self.cache, self.slot, last_only=True
        )
        self.slot += 1
        return logits[:, -1, :]

    def select(self, index: Any) -> None:
        self.cache = [(k[index], v[index]) for k, v in self.cache]
        self.key_mask = self.key_mask[index]

    def kept(self, row: int) -> list[LayerKV]:
        """Keys and values (kv_heads, T, head_dim) per layer of the T tokens cache row ``row`` has run."""
        real = self.key_mask[row, : self.slot].nonzero()[:, 0]  # (T,) slots holding real tokens
        return [(key[row].index_select(1, real), value[row].index_select(1, real)) for key, value in self.cache]


def _keep_sessions(
    engine: HFEngine, stepper: Any, rows: Sequence[_Row], generated: list[list[int]], ended: list[tuple[int, int]]
) -> None:
    """Keep the keys and values of the rows that ended, (cache row, row) pairs, under their sessions.

    A row has run its prompt and every generated token but the last (sampled, never fed back).
    """
    for cache_row, r in ended:
        ids, _, session = rows[r]
        if session is not None and engine.kv_reuse:
            tokens = [*ids, *generated[r][:-1]]
            engine.sessions.keep(session, tokens, stepper.kept(cache_row), engine.policy_version)


def _row_uniforms(rows: Sequence[_Row], limits: Sequence[int]) -> Any:
    """(B, max(limits)) one uniform per row and step, from the row's own seed, row i drawn for its
    own ``limits[i]`` steps (zeros after): inverse-CDF sampling with it makes a sample depend on
    its seed and budget alone, not on its batch mates or their budgets."""
    import torch

    uniforms = torch.zeros((len(rows), max(limits)))
    for i, ((_, seed, _), limit) in enumerate(zip(rows, limits)):
        generator = torch.Generator(device="cpu")
        generator.manual_seed(seed if seed is not None else int(torch.randint(0, 2**62, (1,)).item()) + i)
        uniforms[i, :limit] = torch.rand(limit, generator=generator)
    return uniforms


def _sample_batch(
    engine: HFEngine, rows: Sequence[_Row], params: SamplingParams, limits: Sequence[int]
) -> list[Sample]:
    """One sample per row; row i stops at ``limits[i]`` new tokens (finish reason ``length``),
    the batch runs until its longest budget (``params.max_tokens`` is not read)."""
    import torch

    model, tokenizer = engine.model, engine.tokenizer
    device = next(model.parameters()).device
    batch, longest = len(rows), max(limits)
    plan = _plan_prefill(engine, rows, device)
    uniforms = _row_uniforms(rows, limits).to(device)  # (B, longest)

    generated: list[list[int]] = [[] for _ in rows]
    logprobs: list[list[float]] = [[] for _ in rows]
    versions: list[list[int]] = [[] for _ in rows]
    finish: list[str | None] = [None] * batch
    active = list(range(batch))  # row index in `rows` of each live cache row
    active_index = torch.arange(batch, device=device)
    stepper = _LeanStepper(engine.lean, engine.sample_dtype) if engine.lean is not None else _HFStepper(model)
    eos = engine.eos_token_ids
    with torch.inference_mode():
        logits = stepper.prefill(plan, longest).float()  # (B_active, V)
        engine.prefill_tokens += stepper.prefilled_tokens
        next_position = plan.positions[plan.row_item, -1:] + 1  # (B_active, 1)
        for step in range(longest):
            scaled = logits / params.temperature if params.temperature not in (0, 1) else logits  # x / 1 is x
            keep = truncation_mask(scaled, params.top_k, params.top_p) if params.temperature else None  # (B_active, V)
            candidates = scaled if keep is None else scaled.masked_fill(~keep, float("-inf"))  # (B_active, V)
            if params.temperature == 0:
                chosen = logits.argmax(dim=-1)
            else:
                cdf = torch.softmax(candidates, dim=-1).cumsum(dim=-1)  # (B_active, V)
                draw = uniforms[active_index, step : step + 1] * cdf[:, -1:]  # (B_active, 1)
                chosen = torch.searchsorted(cdf, draw, right=True)[:, 0].clamp(max=logits.shape[-1] - 1)
            # The chosen token's log-prob in the distribution sampled, by ``truncated_logprobs``'s formula:
            # logits equal to the trainer's give log-probs equal to its bits.
            chosen_logprobs = (candidates.gather(-1, chosen[:, None])[:, 0] - torch.logsumexp(candidates, -1)).tolist()
            keep, ended = [], []
            for k, (r, token) in enumerate(zip(active, chosen.tolist())):
                generated[r].append(token)
                logprobs[r].append(chosen_logprobs[k])
                versions[r].append(engine.policy_version)
                reason = _finish_reason(generated[r], token, eos, params, tokenizer)
                if reason is None and len(generated[r]) == limits[r]:
                    reason = "length"
                if reason is None:
                    keep.append(k)
                else:
                    finish[r] = reason
                    ended.append((k, r))
            _keep_sessions(engine, stepper, rows, generated, ended)
            if not keep:
                break
            if len(keep) < len(active):
                index = torch.tensor(keep, device=device)
                stepper.select(index)
                next_position, chosen, active_index = next_position[index], chosen[index], active_index[index]
                active = [active[k] for k in keep]
            if engine._swap_midway():
                stepper.close()
                stepper, logits, next_position = _prefill_again(engine, rows, generated, active, longest - step - 1)
                continue
            logits = stepper.decode(chosen, next_position).float()
            next_position = next_position + 1
    stepper.close()
    return [
        Sample(
            text=tokenizer.decode(generated[r], skip_special_tokens=False),
            token_ids=tuple(generated[r]),
            logprobs=tuple(logprobs[r]),
            finish_reason=finish[r] or "length",
            versions=tuple(versions[r]),
        )
        for r in range(batch)
    ]


def _prefill_again(
    engine: HFEngine, rows: Sequence[_Row], generated: list[list[int]], active: list[int], remaining: int
) -> tuple[Any, Any, Any]:
    """After weights changed mid-batch: a new stepper whose cache holds each live row's context
    (prompt and tokens so far) under the new weights, the logits of each row's next token, and
    its next position. Kept sessions are not reused: their keys and values are the old weights'."""
    stepper = _LeanStepper(engine.lean, engine.sample_dtype) if engine.lean is not None else _HFStepper(engine.model)
    contexts = [([*rows[r][0], *generated[r]], None, None) for r in active]
    plan = _plan_prefill(engine, contexts, next(engine.model.parameters()).device)
    logits = stepper.prefill(plan, remaining).float()  # (B_active, V)
    engine.prefill_tokens += stepper.prefilled_tokens
    return stepper, logits, plan.positions[plan.row_item, -1:] + 1


def _cache_argument(model: Any) -> str:
    """The forward() keyword for the KV cache: newer transformers renamed past_key_values."""
    import inspect

    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # a peft wrapper passes kwargs on
    return "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"


def _finish_reason(
    ids: list[int], token: int, eos: frozenset[int], params: SamplingParams, tokenizer: Any
) -> str | None:
    if token in eos and not params.ignore_eos:
        return "eos"
    if params.stop:
        tail = tokenizer.decode(ids[-_STOP_TAIL_TOKENS:], skip_special_tokens=False)
        if any(stop in tail for stop in params.stop):
            return "stop"
    if params.repetition_stop and len(ids) % 8 == 0 and repeating_block(ids, params.repetition_stop):
        return "repetition"
    return None


class _Batcher:
    """Gathers concurrent ``agenerate`` calls into shared batches (calls whose sampling parameters
    differ only in ``max_tokens`` share one: each row stops at its own call's budget).

    A batch runs on the event loop's thread; sandbox executions and code verifications of
    other trajectories run in their own processes meanwhile, so generation and tool use
    overlap.
    """

    def __init__(self, engine: HFEngine):
        self.engine = engine
        self.loop = asyncio.get_running_loop()
        self._pending: list[tuple[list[_Row], SamplingParams, asyncio.Future[list[Sample]]]] = []
        self._worker: asyncio.Task[None] | None = None

    async def submit(self, rows: list[_Row], params: SamplingParams) -> list[list[Sample]]:
        """Samples of ``rows`` (``params.n`` consecutive rows per prompt), grouped per prompt."""
        prompts = len(rows) // params.n
        future: asyncio.Future[list[Sample]] = self.loop.create_future()
        self._pending.append((rows, params.model_copy(update={"n": 1, "seed": None}), future))
        if self._worker is None or self._worker.done():
            self._worker = self.loop.create_task(self._run())
        samples = await future
        return [samples[i * params.n : (i + 1) * params.n] for i in range(prompts)]

    async def _run(self) -> None:
        while self._pending:
            await gather_requests(self._pending, self.engine.max_batch_size)
            params = self._pending[0][1]
            group = [p for p in self._pending if _shares_batch(p[1], params)]
            taken, size = [], 0
            for item in group:
                if taken and size + len(item[0]) > self.engine.max_batch_size:
                    break
                taken.append(item)
                size += len(item[0])
            for item in taken:
                self._pending.remove(item)
            rows = [row for item in taken for row in item[0]]
            limits = [item[1].max_tokens for item in taken for _ in item[0]]  # each request its own budget
            try:
                # On the event loop's own thread: tool runs and code verification proceed in
                # their sandbox processes meanwhile, and torch keeps one thread pool (a second
                # thread's pool would spin against the trainer's on the same cores).
                outcome: list[Sample] | Exception = self._sample_in_chunks(rows, params, limits)
            except Exception as exc:
                outcome = exc
            settle_batch(taken, outcome)

    def _sample_in_chunks(self, rows: list[_Row], params: SamplingParams, limits: list[int]) -> list[Sample]:
        out: list[Sample] = []
        size = self.engine.max_batch_size
        for start in range(0, len(rows), size):
            out += self.engine.sample_rows(rows[start : start + size], params, limits[start : start + size])
        return out


def _shares_batch(params: SamplingParams, other: SamplingParams) -> bool:
    """Whether requests with these parameters may share a batch: all but ``max_tokens`` agree
    (a batch gives each row its own budget)."""
    return params.model_copy(update={"max_tokens": other.max_tokens}) == other


ENGINES.add("hf", HFEngine)
