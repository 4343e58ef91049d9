"""The ``hf`` engine: batched sampling with a KV cache on any transformers causal LM.

The sampling loop is our own rather than ``model.generate`` so that it can (a) report the
log-prob of every sampled token, (b) give every sample its own random stream, so a sample
depends on its seed and not on which other requests shared its batch, (c) drop finished rows
from the KV cache as it goes, (d) stop rows that loop, and (e) prefill a prompt shared by
several rows (a group) once. ``bench/generate.py`` measures it against ``model.generate`` on
the same model and batch.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from veriloop.core import UserError, ensure_strict_blas
from veriloop.rollout._engine import ENGINES, Prompt
from veriloop.rollout._lean import LeanDecoder
from veriloop.rollout._sampling import Sample, SamplingParams
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
    a trainer passes its own model so that weight sync is free).
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
        self.max_batch_size = max_batch_size
        self.policy_version = 0
        self.busy_s = 0.0  # wall seconds spent sampling, summed over batches (utilisation metrics)
        self._lock = threading.Lock()  # one forward pass at a time on the shared model
        self._batcher: _Batcher | None = None
        eos = {tokenizer.eos_token_id}
        generation_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
        eos |= set(generation_eos) if isinstance(generation_eos, list) else {generation_eos}
        self.eos_token_ids = frozenset(t for t in eos if t is not None)
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
        if prompt and isinstance(prompt[0], dict):
            ids = self._tokenizer.apply_chat_template(list(prompt), add_generation_prompt=True, tokenize=True)
            return list(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids)
        return [int(t) for t in prompt]

    def generate(self, prompts: Sequence[Prompt], params: SamplingParams) -> list[list[Sample]]:
        rows = []
        for prompt in prompts:
            ids = self.encode_prompt(prompt)
            for j in range(params.n):
                seed = None if params.seed is None else params.seed + j
                rows.append((ids, seed))
        samples: list[Sample] = []
        for start in range(0, len(rows), self.max_batch_size):
            samples += self.sample_rows(rows[start : start + self.max_batch_size], params)
        return [samples[i * params.n : (i + 1) * params.n] for i in range(len(prompts))]

    async def agenerate(self, prompts: Sequence[Prompt], params: SamplingParams) -> list[list[Sample]]:
        if self._batcher is None or self._batcher.loop is not asyncio.get_running_loop():
            self._batcher = _Batcher(self)
        return await self._batcher.submit(prompts, params)

    def update_weights(self, state_dict: dict[str, Any] | None, version: int) -> None:
        """Load ``state_dict`` (every weight, or a subset such as a trainer's trainable ones) and
        tag later samples with ``version``; a name the model lacks is an error."""
        with self._lock:
            if state_dict:
                unexpected = self.model.load_state_dict(state_dict, strict=False).unexpected_keys
                if unexpected:
                    raise KeyError(f"weights the rollout model does not have: {', '.join(sorted(unexpected)[:5])}")
            self.policy_version = version

    def close(self) -> None:
        self._batcher = None

    def sample_rows(self, rows: Sequence[tuple[Sequence[int], int | None]], params: SamplingParams) -> list[Sample]:
        """Sample one continuation per (prompt ids, seed) row, all in one batch."""
        with self._lock:
            started = time.perf_counter()
            try:
                return _sample_batch(self, rows, params)
            finally:
                self.busy_s += time.perf_counter() - started


def _filter_top_p(logits: Any, top_p: float) -> Any:
    """Set logits outside the smallest set with probability mass >= top_p to -inf. (B, V)."""
    import torch

    sorted_logits, order = torch.sort(logits, descending=True, dim=-1)
    cumulative = torch.softmax(sorted_logits, dim=-1).cumsum(dim=-1)
    drop_sorted = cumulative - torch.softmax(sorted_logits, dim=-1) >= top_p
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, float("-inf"))


class _HFStepper:
    """Prefill and decode through the model itself, with a transformers KV cache."""

    def __init__(self, model: Any):
        from transformers import DynamicCache

        self.model = model
        self.cache = DynamicCache()
        self.cache_arg = _cache_argument(model)

    def prefill(self, input_ids: Any, attention: Any, positions: Any, max_new: int, rows: Any) -> Any:
        """Last-position logits (B, V) of each row's prompt: ``input_ids[rows]`` etc."""
        input_ids, attention, positions = input_ids[rows], attention[rows], positions[rows]
        self.attention = attention
        out = self.model(
            input_ids=input_ids,
            attention_mask=attention,
            position_ids=positions,
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

    def close(self) -> None:
        self.cache = None


class _LeanStepper:
    """Prefill and decode through ``LeanDecoder`` with a preallocated KV cache."""

    def __init__(self, lean: LeanDecoder):
        self.lean = lean
        lean.fuse()  # the weights may have changed since the last batch

    def close(self) -> None:
        self.lean.unfuse()

    def prefill(self, input_ids: Any, attention: Any, positions: Any, max_new: int, rows: Any) -> Any:
        """Each distinct prompt (P, W) once; its rows (B,) then copy its KV cache.

        The LM head runs on the B rows, as in decode steps: a sample's numbers do not depend
        on how many prompts shared its batch (small matmuls take other BLAS paths).
        """
        import torch

        prompts, width = input_ids.shape
        self.slot = width
        self.key_mask = torch.cat([attention.bool(), attention.new_ones((prompts, max_new), dtype=torch.bool)], dim=1)
        self.cache = self.lean.new_cache(prompts, width + max_new, self.lean.embed.weight)
        hidden = self.lean.forward(
            input_ids, positions, self.key_mask[:, :width], self.cache, 0, last_only=True, head=False
        )  # (P, 1, H)
        if prompts < len(rows):
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


def _sample_batch(
    engine: HFEngine, rows: Sequence[tuple[Sequence[int], int | None]], params: SamplingParams
) -> list[Sample]:
    import torch

    model, tokenizer = engine.model, engine.tokenizer
    device = next(model.parameters()).device
    batch = len(rows)
    # Distinct prompts (P, W), left-padded; the lean stepper prefills each once for all its rows.
    distinct: dict[tuple[int, ...], int] = {}
    row_prompt = [distinct.setdefault(tuple(ids), len(distinct)) for ids, _ in rows]
    width = max(len(ids) for ids in distinct)
    input_ids = torch.full((len(distinct), width), engine.pad_token_id, dtype=torch.long)
    attention = torch.zeros((len(distinct), width), dtype=torch.long)
    for ids, i in distinct.items():  # left padding
        input_ids[i, width - len(ids) :] = torch.tensor(ids, dtype=torch.long)
        attention[i, width - len(ids) :] = 1
    input_ids, attention = input_ids.to(device), attention.to(device)
    positions = (attention.cumsum(-1) - 1).clamp(min=0)  # (P, W)
    # (B, max_tokens) one uniform per row and step, from the row's own seed: inverse-CDF
    # sampling with it makes a sample depend on its seed alone, not on its batch mates.
    uniforms = torch.empty((batch, params.max_tokens))
    for i, (_, seed) in enumerate(rows):
        generator = torch.Generator(device="cpu")
        generator.manual_seed(seed if seed is not None else int(torch.randint(0, 2**62, (1,)).item()) + i)
        uniforms[i] = torch.rand(params.max_tokens, generator=generator)
    uniforms = uniforms.to(device)

    generated: list[list[int]] = [[] for _ in rows]
    logprobs: list[list[float]] = [[] for _ in rows]
    finish: list[str | None] = [None] * batch
    active = list(range(batch))  # row index in `rows` of each live cache row
    active_index = torch.arange(batch, device=device)
    stepper = _LeanStepper(engine.lean) if engine.lean is not None else _HFStepper(model)
    eos = engine.eos_token_ids
    with torch.inference_mode():
        rows_index = torch.tensor(row_prompt, device=device)  # (B,) the prompt of each row
        logits = stepper.prefill(
            input_ids, attention, positions, params.max_tokens, rows_index
        ).float()  # (B_active, V)
        next_position = positions[rows_index, -1:] + 1  # (B_active, 1)
        for step in range(params.max_tokens):
            scaled = logits / params.temperature if params.temperature > 0 else logits
            log_probs = torch.log_softmax(scaled, dim=-1)  # (B_active, V) the distribution trained on
            if params.temperature == 0:
                chosen = logits.argmax(dim=-1)
            else:
                candidates = _filter_top_p(scaled, params.top_p) if params.top_p < 1 else scaled
                cdf = torch.softmax(candidates, dim=-1).cumsum(dim=-1)  # (B_active, V)
                draw = uniforms[active_index, step : step + 1] * cdf[:, -1:]  # (B_active, 1)
                chosen = torch.searchsorted(cdf, draw, right=True)[:, 0].clamp(max=logits.shape[-1] - 1)
            chosen_logprobs = log_probs.gather(-1, chosen[:, None])[:, 0].tolist()
            keep = []
            for k, (r, token) in enumerate(zip(active, chosen.tolist())):
                generated[r].append(token)
                logprobs[r].append(chosen_logprobs[k])
                reason = _finish_reason(generated[r], token, eos, params, tokenizer)
                if reason is None and step == params.max_tokens - 1:
                    reason = "length"
                if reason is None:
                    keep.append(k)
                else:
                    finish[r] = reason
            if not keep:
                break
            if len(keep) < len(active):
                index = torch.tensor(keep, device=device)
                stepper.select(index)
                next_position, chosen, active_index = next_position[index], chosen[index], active_index[index]
                active = [active[k] for k in keep]
            logits = stepper.decode(chosen, next_position).float()
            next_position = next_position + 1
    stepper.close()
    return [
        Sample(
            text=tokenizer.decode(generated[r], skip_special_tokens=False),
            token_ids=tuple(generated[r]),
            logprobs=tuple(logprobs[r]),
            finish_reason=finish[r] or "length",
        )
        for r in range(batch)
    ]


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
    """Gathers concurrent ``agenerate`` calls into shared batches.

    A batch runs on the event loop's thread; sandbox executions and code verifications of
    other trajectories run in their own processes meanwhile, so generation and tool use
    overlap.
    """

    def __init__(self, engine: HFEngine):
        self.engine = engine
        self.loop = asyncio.get_running_loop()
        self._pending: list[
            tuple[list[tuple[list[int], int | None]], SamplingParams, asyncio.Future[list[Sample]]]
        ] = []
        self._worker: asyncio.Task[None] | None = None

    async def submit(self, prompts: Sequence[Prompt], params: SamplingParams) -> list[list[Sample]]:
        rows = []
        for prompt in prompts:
            ids = self.engine.encode_prompt(prompt)
            rows += [(ids, None if params.seed is None else params.seed + j) for j in range(params.n)]
        future: asyncio.Future[list[Sample]] = self.loop.create_future()
        self._pending.append((rows, params.model_copy(update={"n": 1, "seed": None}), future))
        if self._worker is None or self._worker.done():
            self._worker = self.loop.create_task(self._run())
        samples = await future
        return [samples[i * params.n : (i + 1) * params.n] for i in range(len(prompts))]

    async def _run(self) -> None:
        while self._pending:
            await asyncio.sleep(0)  # let every ready coroutine enqueue its request first
            params = self._pending[0][1]
            group = [p for p in self._pending if p[1] == params]
            taken, size = [], 0
            for item in group:
                if taken and size + len(item[0]) > self.engine.max_batch_size:
                    break
                taken.append(item)
                size += len(item[0])
            for item in taken:
                self._pending.remove(item)
            rows = [row for item in taken for row in item[0]]
            try:
                # On the event loop's own thread: tool runs and code verification proceed in
                # their sandbox processes meanwhile, and torch keeps one thread pool (a second
                # thread's pool would spin against the trainer's on the same cores).
                samples = self._sample_in_chunks(rows, params)
            except Exception as exc:  # a failed batch fails its callers, not the loop
                for _, _, future in taken:
                    if not future.done():
                        future.set_exception(exc)
                continue
            offset = 0
            for item_rows, _, future in taken:
                if not future.done():
                    future.set_result(samples[offset : offset + len(item_rows)])
                offset += len(item_rows)

    def _sample_in_chunks(self, rows: list[tuple[list[int], int | None]], params: SamplingParams) -> list[Sample]:
        out: list[Sample] = []
        for start in range(0, len(rows), self.engine.max_batch_size):
            out += self.engine.sample_rows(rows[start : start + self.engine.max_batch_size], params)
        return out


ENGINES.add("hf", HFEngine)
