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
from veriloop.rollout._hf_steppers import HFStepper, LeanStepper, Row, plan_prefill
from veriloop.rollout._kv_sessions import KVSessions
from veriloop.rollout._lean import LeanDecoder, sampling_precision
from veriloop.rollout._sampling import Sample, SamplingParams, truncation_mask
from veriloop.rollout._stopping import repeating_block

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
    ) -> list[Row]:
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


def _keep_sessions(
    engine: HFEngine, stepper: Any, rows: Sequence[Row], generated: list[list[int]], ended: list[tuple[int, int]]
) -> None:
    """Keep the keys and values of the rows that ended, (cache row, row) pairs, under their sessions.

    A row has run its prompt and every generated token but the last (sampled, never fed back).
    """
    for cache_row, r in ended:
        ids, _, session = rows[r]
        if session is not None and engine.kv_reuse:
            tokens = [*ids, *generated[r][:-1]]
            engine.sessions.keep(session, tokens, stepper.kept(cache_row), engine.policy_version)


def _row_uniforms(rows: Sequence[Row], limits: Sequence[int]) -> Any:
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


def _sample_batch(engine: HFEngine, rows: Sequence[Row], params: SamplingParams, limits: Sequence[int]) -> list[Sample]:
    """One sample per row; row i stops at ``limits[i]`` new tokens (finish reason ``length``),
    the batch runs until its longest budget (``params.max_tokens`` is not read)."""
    import torch

    model, tokenizer = engine.model, engine.tokenizer
    device = next(model.parameters()).device
    batch, longest = len(rows), max(limits)
    plan = plan_prefill(engine, rows, device)
    uniforms = _row_uniforms(rows, limits).to(device)  # (B, longest)

    generated: list[list[int]] = [[] for _ in rows]
    logprobs: list[list[float]] = [[] for _ in rows]
    versions: list[list[int]] = [[] for _ in rows]
    finish: list[str | None] = [None] * batch
    active = list(range(batch))  # row index in `rows` of each live cache row
    active_index = torch.arange(batch, device=device)
    stepper = LeanStepper(engine.lean, engine.sample_dtype) if engine.lean is not None else HFStepper(model)
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
    engine: HFEngine, rows: Sequence[Row], generated: list[list[int]], active: list[int], remaining: int
) -> tuple[Any, Any, Any]:
    """After weights changed mid-batch: a new stepper whose cache holds each live row's context
    (prompt and tokens so far) under the new weights, the logits of each row's next token, and
    its next position. Kept sessions are not reused: their keys and values are the old weights'."""
    stepper = LeanStepper(engine.lean, engine.sample_dtype) if engine.lean is not None else HFStepper(engine.model)
    contexts = [([*rows[r][0], *generated[r]], None, None) for r in active]
    plan = plan_prefill(engine, contexts, next(engine.model.parameters()).device)
    logits = stepper.prefill(plan, remaining).float()  # (B_active, V)
    engine.prefill_tokens += stepper.prefilled_tokens
    return stepper, logits, plan.positions[plan.row_item, -1:] + 1


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
        self._pending: list[tuple[list[Row], SamplingParams, asyncio.Future[list[Sample]]]] = []
        self._worker: asyncio.Task[None] | None = None

    async def submit(self, rows: list[Row], params: SamplingParams) -> list[list[Sample]]:
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

    def _sample_in_chunks(self, rows: list[Row], params: SamplingParams, limits: list[int]) -> list[Sample]:
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
