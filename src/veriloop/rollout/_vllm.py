"""The ``vllm`` engine: token-level sampling on an in-process vLLM, with in-place weight pushes.

It keeps the ``hf`` engine's contract (``_engine.py``, ``_hf.py``): token-id or chat prompts,
``params.n`` samples per prompt with sample j of a prompt seeded ``seed + j`` (a sample depends
on its seed, not on its batch mates: every sample is its own vLLM request with its own
generator), the log-prob of every sampled token under the distribution it was drawn from
(temperature-scaled, cut by top-k/top-p and renormalised: the one a trainer recomputes), stop strings kept in the text, finish reasons, and
``update_weights`` with full or partial state dicts under Hugging Face names (a partial one
holds whole vLLM layers: q, k and v with their biases together, gate and up together, because
vLLM fuses them and rebuilds a reloaded layer from what it is given).

vLLM runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``), so pushed tensors pass by
reference and a trainer alternates sampling and training on the same cores. It is imported when
the engine is built, never at import time: the package imports without vLLM installed, and
building the engine without it is a ``UserError`` naming ``make setup-vllm``.

Multi-turn: the engine keeps no sessions (``keeps_sessions`` is False). vLLM's prefix cache
(``enable_prefix_caching``) reuses the keys and values of any prompt prefix it has computed,
so a conversation's next turn prefills only its new tokens without the episode naming a
session; a weight push empties the cache.

With ``top_k``/``top_p`` the log-probs are vLLM's ``processed_logprobs``: the log-softmax of the
logits after temperature and vLLM's top-k/top-p cut, which is the contract's truncated,
renormalised distribution. (FlashInfer's fused top-k/top-p sampler returns no log-probs; vLLM
uses its PyTorch sampler whenever processed log-probs are asked for, or per-request seeds are
set, as they are here.) Repetition stops (``repetition_stop``) are applied
after sampling: the sample is cut where the ``hf`` engine would have stopped it.
``torch.set_num_threads`` has no effect once vLLM is loaded in a process.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from veriloop.core import UserError
from veriloop.rollout._engine import (
    ENGINES,
    Prompt,
    encode_chat_or_ids,
    eos_token_ids,
    gather_requests,
    settle_batch,
)
from veriloop.rollout._sampling import Sample, SamplingParams
from veriloop.rollout._stopping import repeating_block

_Row = tuple[list[int], int]  # prompt ids, seed
_CPU_STEP_TOKENS = 4096  # tokens one vLLM step takes on a CPU (whole prompts only; see _whole_prefills)
SETUP_HINT = "the vllm engine needs vLLM: run `make setup-vllm` (builds .venv-vllm) and use .venv-vllm/bin/python"


def require_vllm() -> None:
    """Fail early, before work that would come to nothing, when vLLM is not installed: a
    UserError saying how to get it (without importing vLLM, which takes seconds)."""
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        raise UserError(SETUP_HINT)


def _whole_prefills(max_model_len: int) -> dict[str, Any]:
    """vLLM settings that keep every prompt's prefill in one step, on CPUs.

    A prompt cut across steps (chunked prefill, when a batch's prompts exceed the step's token
    budget) makes vLLM discard the token sampled after the first part and wind that request's
    seeded generator back, which only CUDA generators allow: on a CPU the whole engine fails
    with "CPU Generator does not use offset". Without chunking a step takes whole prompts only
    (a budget of at least one full-length sequence), and the rest wait for the next step.
    """
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        return {}
    return {"enable_chunked_prefill": False, "max_num_batched_tokens": max(max_model_len, _CPU_STEP_TOKENS)}


def _import_vllm() -> Any:
    """vLLM, loaded in-process; a missing install is a UserError saying how to get one."""
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # in-process: tensors pushed by reference
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")  # its start-up notes are for servers
    try:
        import vllm
    except ImportError as exc:
        raise UserError(f"{SETUP_HINT} (import vllm failed: {exc})") from None
    return vllm


@contextlib.contextmanager
def caller_rng_kept() -> Iterator[None]:
    """Restore the global random states (torch, Python, NumPy) that vLLM reseeds or draws from."""
    import numpy as np
    import torch

    torch_state, python_state, numpy_state = torch.get_rng_state(), random.getstate(), np.random.get_state()
    cuda_states = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
    try:
        yield
    finally:
        torch.set_rng_state(torch_state)
        random.setstate(python_state)
        np.random.set_state(numpy_state)
        if cuda_states is not None:
            torch.cuda.set_rng_state_all(cuda_states)


class VLLMEngine:
    """Token-level engine over an in-process vLLM ``LLM`` loaded from a local HF model directory.

    ``kv_cache_bytes`` bounds vLLM's KV cache (without it vLLM reserves most of the memory);
    ``max_model_len`` is the longest prompt plus completion (default: the model's positions,
    at most 4096); ``max_num_seqs`` the sequences decoded together. ``dtype`` is that of the
    weights vLLM runs (float32 on CPU; bfloat16 on GPUs or CPUs that have it); pushed tensors
    are cast to it.
    """

    name = "vllm"
    keeps_sessions = False  # the prefix cache reuses a conversation's keys and values by itself

    def __init__(
        self,
        model: str | Path,
        dtype: str = "float32",
        kv_cache_bytes: int = 256 * 2**20,
        max_model_len: int | None = None,
        max_num_seqs: int = 64,
        enable_prefix_caching: bool = True,
        enforce_eager: bool = True,
        seed: int = 0,
    ):
        path = Path(model)
        if not (path / "config.json").is_file():
            raise UserError(f"{path}: not a model directory (no config.json)")
        vllm = _import_vllm()
        from transformers import AutoConfig, AutoTokenizer

        config = AutoConfig.from_pretrained(path)
        positions = getattr(config, "max_position_embeddings", None) or 4096
        self.max_model_len = max_model_len or min(positions, 4096)
        self.max_num_seqs = max_num_seqs
        self._tokenizer = AutoTokenizer.from_pretrained(path)
        self.tied_embeddings = bool(getattr(config, "tie_word_embeddings", False))
        self.weight_names = _checkpoint_names(path)
        with caller_rng_kept():
            self.llm = vllm.LLM(
                model=str(path),
                dtype=dtype,
                kv_cache_memory_bytes=kv_cache_bytes,
                max_model_len=self.max_model_len,
                max_num_seqs=max_num_seqs,
                enable_prefix_caching=enable_prefix_caching,
                enforce_eager=enforce_eager,
                # After temperature and the top-k/top-p cut, renormalised: the distribution sampled and trained on.
                logprobs_mode="processed_logprobs",
                seed=seed,
                **_whole_prefills(self.max_model_len),
            )
        self._vllm_sampling = vllm.SamplingParams
        self.dtype = dtype
        self.policy_version = 0
        self.busy_s = 0.0  # wall seconds inside vLLM's generate, summed over batches
        self._lock = threading.Lock()  # one vLLM call at a time
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vllm")
        self._batcher: _Batcher | None = None
        self._packed: dict[str, list[str]] | None = None  # vLLM's fused layers, read on the first partial push
        generation_config = self.llm.llm_engine.model_config.try_get_generation_config()
        self.eos_token_ids = eos_token_ids(self._tokenizer, generation_config.get("eos_token_id"))
        pad = self._tokenizer.pad_token_id
        self.pad_token_id = pad if pad is not None else min(self.eos_token_ids)

    @property
    def tokenizer(self) -> Any:
        return self._tokenizer

    @property
    def context_length(self) -> int:
        """Positions vLLM serves (prompt and completion together)."""
        return self.max_model_len

    def encode_prompt(self, prompt: Prompt) -> list[int]:
        """Token ids of a prompt: ids pass through; chat messages get the chat template once."""
        return encode_chat_or_ids(self._tokenizer, prompt)

    def generate(self, prompts: Sequence[Prompt], params: SamplingParams) -> list[list[Sample]]:
        samples = self.sample_rows(self._rows(prompts, params), [params] * len(prompts) * params.n)
        return [samples[i * params.n : (i + 1) * params.n] for i in range(len(prompts))]

    async def agenerate(self, prompts: Sequence[Prompt], params: SamplingParams) -> list[list[Sample]]:
        """As ``generate``; vLLM runs on a worker thread, and concurrent calls share one batch."""
        if self._batcher is None or self._batcher.loop is not asyncio.get_running_loop():
            self._batcher = _Batcher(self)
        samples = await self._batcher.submit(self._rows(prompts, params), params)
        return [samples[i * params.n : (i + 1) * params.n] for i in range(len(prompts))]

    def _rows(self, prompts: Sequence[Prompt], params: SamplingParams) -> list[_Row]:
        """One (prompt ids, seed) row per sample; without a seed, seeds come from torch's global
        generator, as the ``hf`` engine draws them."""
        import torch

        base = params.seed if params.seed is not None else int(torch.randint(0, 2**62, (1,)).item())
        rows = []
        for prompt in prompts:
            ids = self.encode_prompt(prompt)
            rows += [(ids, base + j) for j in range(params.n)]
        return rows

    def sample_rows(self, rows: Sequence[_Row], params: Sequence[SamplingParams]) -> list[Sample]:
        """One sample per (prompt ids, seed) row, row i sampled with ``params[i]`` (n ignored)."""
        requests = [self._request(seed, p) for (_, seed), p in zip(rows, params)]
        prompts = [{"prompt_token_ids": list(ids)} for ids, _ in rows]
        with self._lock, caller_rng_kept():
            started = time.perf_counter()
            try:
                outputs = self.llm.generate(prompts, requests, use_tqdm=False)
            finally:
                self.busy_s += time.perf_counter() - started
        return [self._sample(output.outputs[0], p) for output, p in zip(outputs, params)]

    def _request(self, seed: int, params: SamplingParams) -> Any:
        return self._vllm_sampling(
            n=1,
            temperature=params.temperature,
            top_p=params.top_p,
            top_k=params.top_k,  # 0: every token
            max_tokens=params.max_tokens,
            stop=list(params.stop) or None,
            include_stop_str_in_output=True,  # the contract keeps a stop string in the text
            ignore_eos=params.ignore_eos,
            seed=seed % 2**63,
            logprobs=0,  # the sampled token's own log-prob
            skip_special_tokens=False,
        )

    def _sample(self, completion: Any, params: SamplingParams) -> Sample:
        token_ids = list(completion.token_ids)
        logprobs: list[float] = []
        if completion.logprobs is not None:
            logprobs = [step[token].logprob for step, token in zip(completion.logprobs, token_ids)]
        finish = _finish_reason(completion)
        cut = _repetition_cut(token_ids, params.repetition_stop) if finish != "stop" else None
        if cut is not None:
            token_ids, logprobs, finish = token_ids[:cut], logprobs[:cut], "repetition"
        return Sample(
            text=self._tokenizer.decode(token_ids, skip_special_tokens=False),
            token_ids=tuple(token_ids),
            logprobs=tuple(logprobs),
            finish_reason=finish,
        )

    def update_weights(self, state_dict: dict[str, Any] | None, version: int) -> None:
        """Load ``state_dict`` (every weight, or a subset, under Hugging Face names) into vLLM in
        place and tag later samples with ``version``; None only sets the version.

        A subset must hold whole vLLM layers: vLLM runs q, k and v (and gate and up) as one fused
        layer and rebuilds a layer from what is pushed, so pushing ``q_proj`` alone is a
        ValueError naming the companions it needs (a LoRA trainer pushes every adapted layer
        with its bias). A name the model lacks is a KeyError. With tied embeddings
        ``lm_head.weight`` is the embedding matrix.
        """
        with self._lock:
            if state_dict:
                weights = self._weights(state_dict)
                self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights})
                if self.tied_embeddings and any(name == _EMBEDDING for name, _ in weights):
                    self.llm.apply_model(_repack_tied_head)
                self.llm.reset_prefix_cache()  # keys and values of the old weights
            self.policy_version = version

    def _weights(self, state_dict: dict[str, Any]) -> list[tuple[str, Any]]:
        import torch

        unknown = sorted(set(state_dict) - self.weight_names - {"lm_head.weight"})
        if unknown:
            raise KeyError(f"weights the rollout model does not have: {', '.join(unknown[:5])}")
        weights = dict(state_dict)
        if self.tied_embeddings and "lm_head.weight" in weights:
            head = weights.pop("lm_head.weight")  # vLLM skips it when tied; it is the embedding
            weights.setdefault(_EMBEDDING, head)
        self._check_whole_layers(set(weights))
        dtype = getattr(torch, self.dtype)
        return [(name, tensor.detach().to("cpu", dtype).contiguous()) for name, tensor in weights.items()]

    def _check_whole_layers(self, names: set[str]) -> None:
        if names >= self.weight_names:
            return
        if self._packed is None:
            self._packed = self.llm.apply_model(_packed_modules)[0]
        layers: dict[tuple[str, str], set[str]] = {}
        for name in self.weight_names:
            layers.setdefault(_layer_of(name, self._packed), set()).add(name)
        for name in sorted(names):
            missing = layers.get(_layer_of(name, self._packed), set()) - names
            if missing:
                raise ValueError(
                    f"a partial weight push must hold whole vLLM layers: {name} also needs {', '.join(sorted(missing))}"
                )

    def close(self) -> None:
        self._batcher = None
        self._executor.shutdown(wait=True)


_EMBEDDING = "model.embed_tokens.weight"


def _repack_tied_head(model: Any) -> None:
    """Rebuild the LM head's kernel from the (tied) embedding matrix just loaded: on CPU vLLM
    keeps the head's matrix packed apart, and reloading the embedding leaves that copy stale."""
    head = model.lm_head
    head.quant_method.process_weights_after_loading(head)


def _packed_modules(model: Any) -> dict[str, list[str]]:
    """vLLM's fused layers of the model: fused name -> the checkpoint modules it runs."""
    return dict(getattr(model, "packed_modules_mapping", {}) or {})


def _layer_of(name: str, packed: dict[str, list[str]]) -> tuple[str, str]:
    """The vLLM layer a checkpoint weight loads into: (parent module, fused or own module name)."""
    parent, _, rest = name.rpartition(".")[0].rpartition(".")
    for fused, members in packed.items():
        if rest in members:
            return parent, fused
    return parent, rest


def _checkpoint_names(path: Path) -> set[str]:
    """Names of the weights a model directory's safetensors files hold."""
    from safetensors import safe_open

    names: set[str] = set()
    for file in sorted(path.glob("*.safetensors")):
        with safe_open(str(file), framework="pt") as handle:
            names.update(handle.keys())
    return names


def _finish_reason(completion: Any) -> str:
    """vLLM's ``finish_reason``/``stop_reason`` as ours: a stop string, end-of-sequence or length."""
    if completion.finish_reason == "length":
        return "length"
    if completion.finish_reason == "stop":
        return "stop" if isinstance(completion.stop_reason, str) else "eos"
    return "error"


def _repetition_cut(token_ids: list[int], min_repeats: int) -> int | None:
    """Where the ``hf`` engine stops a looping sample (it checks every 8 tokens); None if nowhere."""
    if not min_repeats:
        return None
    for end in range(8, len(token_ids) + 1, 8):
        if repeating_block(token_ids[:end], min_repeats):
            return end
    return None


class _Batcher:
    """Gathers concurrent ``agenerate`` calls into one vLLM call, run on the engine's worker
    thread so that the event loop (tool calls, verification) runs on meanwhile."""

    def __init__(self, engine: VLLMEngine):
        self.engine = engine
        self.loop = asyncio.get_running_loop()
        self._pending: list[tuple[list[_Row], SamplingParams, asyncio.Future[list[Sample]]]] = []
        self._worker: asyncio.Task[None] | None = None

    async def submit(self, rows: list[_Row], params: SamplingParams) -> list[Sample]:
        future: asyncio.Future[list[Sample]] = self.loop.create_future()
        self._pending.append((rows, params, future))
        if self._worker is None or self._worker.done():
            self._worker = self.loop.create_task(self._run())
        return await future

    async def _run(self) -> None:
        while self._pending:
            await gather_requests(self._pending, self.engine.max_num_seqs)
            taken, self._pending = self._pending, []
            rows = [row for item_rows, _, _ in taken for row in item_rows]
            params = [p for item_rows, p, _ in taken for _ in item_rows]
            outcome: list[Sample] | Exception
            try:
                outcome = await self.loop.run_in_executor(self.engine._executor, self.engine.sample_rows, rows, params)
            except Exception as exc:
                outcome = exc
            settle_batch(taken, outcome)


ENGINES.add("vllm", VLLMEngine)
