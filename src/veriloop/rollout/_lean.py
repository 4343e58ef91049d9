"""A lean forward pass for Llama-family decoders (Qwen2, Llama, Mistral shapes).

transformers' modules spend most of a small model's step in Python bookkeeping (mask
builders, cache objects, hooks). This computes the same function with a handful of tensor
ops on the model's own parameters, so gradients still reach them and weight updates need no
copy. Used by the ``hf`` engine's sampler and by the trainer's log-prob pass whenever
``LeanDecoder.supports(model)``; otherwise both use the model itself. Tests check that its
logits equal the model's.

``forward_prefixed`` is the training pass: the samples of a group share their prompt, so each
distinct prompt is run once and its keys and values are shared by the group's completions
(the same function, with the prompt's share of the work divided by the group size; gradients
from every completion reach the one copy of the prompt).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
import torch.utils.checkpoint

from veriloop.core import UserError

_SUPPORTED = {"qwen2", "llama", "mistral"}


class LeanDecoder:
    """``forward(ids, positions, key_mask, cache)`` over the weights of a supported HF model."""

    def __init__(self, model: Any):
        self.model = model
        config = model.config
        inner = model.model
        self.layers = list(inner.layers)
        self.embed = inner.embed_tokens
        self.norm = inner.norm
        self.lm_head = model.lm_head
        self.heads = config.num_attention_heads
        self.kv_heads = config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.heads
        self.eps = config.rms_norm_eps
        theta = _rope_theta(config)
        self.inv_freq = 1.0 / (theta ** (torch.arange(0, self.head_dim, 2, dtype=torch.float) / self.head_dim))
        self._fused: list[_LayerWeights] | None = None
        self._fused_outer: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None  # embed, norm, lm_head

    @staticmethod
    def supports(model: Any) -> bool:
        config = getattr(model, "config", None)
        if config is None or getattr(config, "model_type", None) not in _SUPPORTED or hasattr(model, "peft_config"):
            return False
        if getattr(config, "hidden_act", "silu") != "silu" or getattr(config, "use_sliding_window", False):
            return False
        if getattr(config, "attention_bias", False) and config.model_type != "qwen2":
            return False
        try:
            _rope_theta(config)
        except ValueError:
            return False
        layer = model.model.layers[0]
        return not hasattr(layer.self_attn, "q_norm")

    def fuse(self, dtype: torch.dtype | None = None) -> None:
        """Snapshot the weights for inference (``forward`` and ``head`` use the snapshot): q/k/v
        and gate/up concatenated, everything in ``dtype`` (default: the parameters' own).

        Sampling in bfloat16 from a float32 policy is this snapshot in bfloat16: on CPUs with
        bfloat16 matrix units it decodes several times faster. Call again after the weights
        change; ``unfuse`` returns to the live parameters.
        """
        with torch.no_grad():
            self._fused = [self._fused_weights(layer, dtype) for layer in self.layers]
            cast = _caster(dtype)
            embed = cast(self.embed.weight)
            head = embed if self.lm_head.weight is self.embed.weight else cast(self.lm_head.weight)
            self._fused_outer = (embed, cast(self.norm.weight), head)

    @staticmethod
    def _fused_weights(layer: Any, dtype: torch.dtype | None = None) -> _LayerWeights:
        attention, mlp, cast = layer.self_attn, layer.mlp, _caster(dtype)
        qkv = torch.cat([attention.q_proj.weight, attention.k_proj.weight, attention.v_proj.weight])
        biases = [attention.q_proj.bias, attention.k_proj.bias, attention.v_proj.bias]
        qkv_bias = torch.cat(biases) if all(b is not None for b in biases) else None
        gate_up = torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight])
        return _LayerWeights(
            input_norm=cast(layer.input_layernorm.weight),
            qkv=cast(qkv),
            qkv_bias=None if qkv_bias is None else cast(qkv_bias),
            output=cast(attention.o_proj.weight),
            output_bias=None if attention.o_proj.bias is None else cast(attention.o_proj.bias),
            post_norm=cast(layer.post_attention_layernorm.weight),
            gate_up=cast(gate_up),
            down=cast(mlp.down_proj.weight),
        )

    def unfuse(self) -> None:
        self._fused = None
        self._fused_outer = None

    @property
    def dtype(self) -> torch.dtype:
        """The precision ``forward`` computes in: the snapshot's while fused, else the parameters'."""
        return self._fused_outer[0].dtype if self._fused_outer is not None else self.embed.weight.dtype

    def new_cache(self, batch: int, length: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Preallocated (key, value) per layer: (B, kv_heads, length, head_dim), in ``dtype``."""
        shape = (batch, self.kv_heads, length, self.head_dim)
        like = self.embed.weight
        return [(like.new_zeros(shape, dtype=self.dtype), like.new_zeros(shape, dtype=self.dtype)) for _ in self.layers]

    def forward(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        key_mask: torch.Tensor,
        cache: list[tuple[torch.Tensor, torch.Tensor]] | None = None,
        cache_start: int = 0,
        last_only: bool = False,
        head: bool = True,
    ) -> torch.Tensor:
        """Logits (B, T, V); (B, 1, V) with ``last_only``. Without ``head``, the hidden states
        (B, T, H) or (B, 1, H) that ``head`` turns into those logits.

        ``input_ids``/``positions``: (B, T). ``key_mask``: (B, S) bool, which key slots hold
        real tokens, S = cache_start + T (or T without a cache). With a cache, the new keys
        and values are written at slots ``cache_start ... cache_start + T - 1``.
        """
        if self._fused_outer is not None:
            hidden = F.embedding(input_ids, self._fused_outer[0])  # (B, T, H)
        else:
            hidden = self.embed(input_ids)
        batch, steps, _ = hidden.shape
        cos, sin = self._rotary(positions, hidden.dtype)
        cos, sin = cos[:, :, None], sin[:, :, None]  # (B, T, 1, D)
        keys_len = key_mask.shape[1]
        query_slots = torch.arange(cache_start, cache_start + steps, device=hidden.device)
        slots = torch.arange(keys_len, device=hidden.device)[None, :]
        causal = slots <= query_slots[:, None]  # (T, S)
        # A padding query sees at least its own slot, so no attention row is empty (no NaNs).
        mask = (causal[None, None] & key_mask[:, None, None, :]) | (slots == query_slots[:, None])[
            None, None
        ]  # (B, 1, T, S)
        half = self.head_dim // 2
        for index, layer in enumerate(self.layers):
            attention, mlp = layer.self_attn, layer.mlp
            fused = self._fused[index] if self._fused is not None else None
            if fused is not None:
                normed = _rms_norm(hidden, fused.input_norm, self.eps)
                qkv = F.linear(normed, fused.qkv, fused.qkv_bias).view(
                    batch, steps, -1, self.head_dim
                )  # (B, T, heads + 2 kv_heads, D)
                # Queries and keys rotate together: they sit side by side in the fused projection.
                qk = qkv[:, :, : self.heads + self.kv_heads]
                qk = qk * cos + qk.roll(half, -1) * sin
                q, k, v = qk[:, :, : self.heads], qk[:, :, self.heads :], qkv[:, :, self.heads + self.kv_heads :]
            else:
                normed = _rms_norm(hidden, layer.input_layernorm.weight, self.eps)
                q = attention.q_proj(normed).view(batch, steps, self.heads, self.head_dim)
                k = attention.k_proj(normed).view(batch, steps, self.kv_heads, self.head_dim)
                v = attention.v_proj(normed).view(batch, steps, self.kv_heads, self.head_dim)
                q, k = q * cos + q.roll(half, -1) * sin, k * cos + k.roll(half, -1) * sin
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (B, heads, T, D)
            if cache is not None:
                key_cache, value_cache = cache[index]
                key_cache[:, :, cache_start : cache_start + steps] = k
                value_cache[:, :, cache_start : cache_start + steps] = v
                k, v = key_cache[:, :, :keys_len], value_cache[:, :, :keys_len]
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=self.kv_heads != self.heads)
            out = out.transpose(1, 2).reshape(batch, steps, -1)  # (B, T, heads * D)
            if fused is not None:
                hidden = hidden + F.linear(out, fused.output, fused.output_bias)
                normed = _rms_norm(hidden, fused.post_norm, self.eps)
                gate, up = F.linear(normed, fused.gate_up).chunk(2, dim=-1)
                hidden = hidden + F.linear(F.silu(gate) * up, fused.down)
            else:
                hidden = hidden + attention.o_proj(out)
                normed = _rms_norm(hidden, layer.post_attention_layernorm.weight, self.eps)
                hidden = hidden + mlp.down_proj(F.silu(mlp.gate_proj(normed)) * mlp.up_proj(normed))
        if last_only:
            hidden = hidden[:, -1:]
        return self.head(hidden) if head else hidden

    def head(self, hidden: torch.Tensor) -> torch.Tensor:
        """Logits (..., V) from final hidden states (..., H): the last norm, then the LM head."""
        if self._fused_outer is not None:
            _, norm, lm_head = self._fused_outer
            return F.linear(_rms_norm(hidden, norm, self.eps), lm_head)
        return self.lm_head(_rms_norm(hidden, self.norm.weight, self.eps))

    def forward_prefixed(
        self,
        prefix_ids: torch.Tensor,
        prefix_lengths: torch.Tensor,
        row_prefix: torch.Tensor,
        suffix_ids: torch.Tensor,
        suffix_lengths: torch.Tensor,
        head: bool = True,
        checkpoint_layers: bool = False,
        unpadded: bool = False,
    ) -> torch.Tensor:
        """Logits (B, C, V) predicting each suffix token, over rows that share prefixes.

        Row b is the sequence ``prefix_ids[row_prefix[b], :prefix_lengths[...]]`` followed by
        ``suffix_ids[b, :suffix_lengths[b]]``; ``logits[b, j]`` is the distribution the model
        gives ``suffix_ids[b, j]``. ``prefix_ids``: (P, Tp) right-padded, ``prefix_lengths``:
        (P,) at least 1; ``row_prefix``: (B,) indices into P; ``suffix_ids``: (B, C)
        right-padded. Logits at padding positions are unspecified. Each prefix is computed
        once whatever the number of rows sharing it. Without ``head``, the hidden states
        (B, C, H) that ``head`` turns into those logits (so a caller can apply it chunk by
        chunk). ``checkpoint_layers`` keeps only each layer's input for the backward pass and
        recomputes the layer there (activation checkpointing: the same gradients, less memory).
        ``unpadded`` runs the real tokens only, packed end to end, each prefix and each suffix
        attending over its own span (``_Varlen``): the same values, no work on padding.
        """
        layout = _Varlen if unpadded else _Padded
        rows = _Rows((prefix_ids, prefix_lengths, row_prefix, suffix_ids, suffix_lengths), self.kv_heads != self.heads)
        spans = layout(rows)
        hidden = self.embed(spans.ids)  # (N, H)
        cos, sin = self._rotary(spans.positions, hidden.dtype)
        rotary = (cos[:, None], sin[:, None])  # (N, 1, D)
        for layer in self.layers:
            if checkpoint_layers and torch.is_grad_enabled():
                hidden = torch.utils.checkpoint.checkpoint(
                    self._layer, layer, hidden, rotary, spans.attend, use_reentrant=False
                )
            else:
                hidden = self._layer(layer, hidden, rotary, spans.attend)
        predicting = spans.predicting(hidden)  # (B, C, H)
        return self.head(predicting) if head else predicting

    def _layer(
        self, layer: Any, hidden: torch.Tensor, rotary: tuple[torch.Tensor, torch.Tensor], attend: Any
    ) -> torch.Tensor:
        """One decoder layer over the tokens (N, H); ``attend(q, k, v)`` (N, heads or kv_heads, D)
        -> (N, heads * D) is the layout's attention."""
        attention = layer.self_attn
        cos, sin = rotary
        half = self.head_dim // 2
        normed = _rms_norm(hidden, layer.input_layernorm.weight, self.eps)
        q = attention.q_proj(normed).view(-1, self.heads, self.head_dim)
        k = attention.k_proj(normed).view(-1, self.kv_heads, self.head_dim)
        v = attention.v_proj(normed).view(-1, self.kv_heads, self.head_dim)
        q, k = q * cos + q.roll(half, -1) * sin, k * cos + k.roll(half, -1) * sin
        hidden = hidden + attention.o_proj(attend(q, k, v))
        normed = _rms_norm(hidden, layer.post_attention_layernorm.weight, self.eps)
        mlp = layer.mlp
        return hidden + mlp.down_proj(F.silu(mlp.gate_proj(normed)) * mlp.up_proj(normed))

    def _rotary(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin (..., D) of ``positions`` (...), with the sign of rotate_half in sin:
        rotate_half(x) * sin == roll(x, D/2) * [-sin, sin], one roll instead of slices and a cat."""
        freqs = positions[..., None].float() * self.inv_freq.to(positions.device)  # (..., D/2)
        cos = torch.cat((freqs, freqs), dim=-1).cos().to(dtype)
        sin = torch.cat((-freqs.sin(), freqs.sin()), dim=-1).to(dtype)
        return cos, sin


@dataclass(frozen=True)
class _Rows:
    """``forward_prefixed``'s rows (its arguments, as it documents them) and whether keys and
    values have fewer heads than queries."""

    tensors: tuple[torch.Tensor, ...]  # prefix_ids, prefix_lengths, row_prefix, suffix_ids, suffix_lengths
    gqa: bool


class _Padded:
    """``forward_prefixed``'s tokens as slots of the padded (P, Tp) prefixes then (B, C) suffixes,
    flattened: N = P*Tp + B*C tokens, the padding included (its values unspecified)."""

    def __init__(self, rows: _Rows):
        prefix_ids, prefix_lengths, row_prefix, suffix_ids, suffix_lengths = rows.tensors
        gqa = rows.gqa
        device = prefix_ids.device
        (prefixes, prefix_width), (rows, width) = prefix_ids.shape, suffix_ids.shape
        prefix_slots, suffix_slots = torch.arange(prefix_width, device=device), torch.arange(width, device=device)
        prefix_real = prefix_slots[None, :] < prefix_lengths[:, None]  # (P, Tp)
        suffix_real = suffix_slots[None, :] < suffix_lengths[:, None]  # (B, C)
        # A padding query sees at least its own slot, so no attention row is empty (no NaNs).
        prefix_mask = ((prefix_slots[None, :] <= prefix_slots[:, None]) & prefix_real[:, None, :]) | torch.eye(
            prefix_width, dtype=torch.bool, device=device
        )
        suffix_mask = ((suffix_slots[None, :] <= suffix_slots[:, None]) & suffix_real[:, None, :]) | torch.eye(
            width, dtype=torch.bool, device=device
        )
        # (B, 1, C, Tp + C): a suffix query sees its prompt's real tokens, then its own past.
        self.suffix_mask = torch.cat([prefix_real[row_prefix][:, None, :].expand(-1, width, -1), suffix_mask], dim=-1)[
            :, None
        ]
        self.prefix_mask = prefix_mask[:, None]  # (P, 1, Tp, Tp)
        self.positions = torch.cat(
            [
                prefix_slots.expand(prefixes, -1).reshape(-1),
                (prefix_lengths[row_prefix][:, None] + suffix_slots).reshape(-1),
            ]
        )
        self.ids = torch.cat([prefix_ids.reshape(-1), suffix_ids.reshape(-1)])  # (N,)
        self.shape, self.row_prefix, self.prefix_lengths, self.gqa = (
            (prefixes, prefix_width, rows, width),
            row_prefix,
            prefix_lengths,
            gqa,
        )

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        prefixes, prefix_width, rows, width = self.shape
        split, head_dim = prefixes * prefix_width, q.shape[-1]
        # (P, heads, Tp, D) and (B, heads, C, D)
        qp, kp, vp = (x[:split].view(prefixes, prefix_width, -1, head_dim).transpose(1, 2) for x in (q, k, v))
        qs, ks, vs = (x[split:].view(rows, width, -1, head_dim).transpose(1, 2) for x in (q, k, v))
        out_prefix = F.scaled_dot_product_attention(qp, kp, vp, attn_mask=self.prefix_mask, enable_gqa=self.gqa)
        keys, values = torch.cat([kp[self.row_prefix], ks], dim=2), torch.cat([vp[self.row_prefix], vs], dim=2)
        out_suffix = F.scaled_dot_product_attention(qs, keys, values, attn_mask=self.suffix_mask, enable_gqa=self.gqa)
        return torch.cat(
            [out_prefix.transpose(1, 2).reshape(split, -1), out_suffix.transpose(1, 2).reshape(rows * width, -1)]
        )

    def predicting(self, hidden: torch.Tensor) -> torch.Tensor:
        """(B, C, H): suffix token 0 is predicted by the prompt's last token, token j by suffix token j - 1."""
        prefixes, prefix_width, rows, width = self.shape
        split = prefixes * prefix_width
        last_prompt = hidden[:split].view(prefixes, prefix_width, -1)[
            self.row_prefix, self.prefix_lengths[self.row_prefix] - 1
        ]  # (B, H)
        return torch.cat([last_prompt[:, None], hidden[split:].view(rows, width, -1)[:, :-1]], dim=1)


class _Varlen:
    """``forward_prefixed``'s real tokens packed end to end: each prefix's, then each suffix's
    (N = their total). Attention runs span by span: a prefix over itself, causally; a suffix over
    its prefix, then itself causally. No work is spent on padding."""

    def __init__(self, rows: _Rows):
        prefix_ids, prefix_lengths, row_prefix, suffix_ids, suffix_lengths = rows.tensors
        gqa = rows.gqa
        device = prefix_ids.device
        prefix_real = torch.arange(prefix_ids.shape[1], device=device)[None, :] < prefix_lengths[:, None]  # (P, Tp)
        suffix_slots = torch.arange(suffix_ids.shape[1], device=device)
        suffix_real = suffix_slots[None, :] < suffix_lengths[:, None]  # (B, C)
        self.ids = torch.cat([prefix_ids[prefix_real], suffix_ids[suffix_real]])  # (N,)
        prefix_at = [0, *torch.cumsum(prefix_lengths, 0).tolist()]  # span i: prefix_at[i]:prefix_at[i + 1]
        suffix_at = [prefix_at[-1] + n for n in [0, *torch.cumsum(suffix_lengths, 0).tolist()]]
        self.prefix_spans = list(zip(prefix_at[:-1], prefix_at[1:]))
        self.suffix_spans = list(zip(suffix_at[:-1], suffix_at[1:]))
        self.row_prefix = row_prefix.tolist()
        self.positions = torch.cat(
            [torch.arange(n, device=device) for n in prefix_lengths.tolist()]
            + [(prefix_lengths[row_prefix][:, None] + suffix_slots)[suffix_real]]
        )  # (N,) each row's positions from 0
        # (c, p + c) per suffix: all of its prefix, then its own past.
        self.masks = [
            torch.ones(stop - start, stop - start, dtype=torch.bool, device=device).tril()
            for start, stop in self.suffix_spans
        ]
        self.masks = [
            torch.cat([torch.ones(len(m), int(prefix_lengths[p]), dtype=torch.bool, device=device), m], dim=1)
            for m, p in zip(self.masks, self.row_prefix)
        ]
        # (B, C) the token predicting each suffix token: the prompt's last, then the suffix's own.
        prompt_last = torch.tensor([prefix_at[p + 1] - 1 for p in self.row_prefix], device=device)
        suffix_first = torch.tensor(suffix_at[:-1], device=device)
        self.predictor = torch.where(
            suffix_slots[None, :] == 0, prompt_last[:, None], suffix_first[:, None] + suffix_slots[None, :] - 1
        ).clamp(max=len(self.ids) - 1)
        self.gqa = gqa

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        def heads_first(x: torch.Tensor) -> torch.Tensor:
            return x.transpose(0, 1)[None]  # (n, heads, D) -> (1, heads, n, D)

        parts = []
        for start, stop in self.prefix_spans:
            span = slice(start, stop)
            parts.append(
                F.scaled_dot_product_attention(
                    heads_first(q[span]),
                    heads_first(k[span]),
                    heads_first(v[span]),
                    is_causal=True,
                    enable_gqa=self.gqa,
                )
            )
        for (start, stop), prefix, mask in zip(self.suffix_spans, self.row_prefix, self.masks):
            if stop == start:
                continue
            before = slice(*self.prefix_spans[prefix])
            keys = torch.cat([k[before], k[start:stop]])
            values = torch.cat([v[before], v[start:stop]])
            parts.append(
                F.scaled_dot_product_attention(
                    heads_first(q[start:stop]),
                    heads_first(keys),
                    heads_first(values),
                    attn_mask=mask,
                    enable_gqa=self.gqa,
                )
            )
        return torch.cat([part[0].transpose(0, 1).reshape(part.shape[2], -1) for part in parts])  # (N, heads * D)

    def predicting(self, hidden: torch.Tensor) -> torch.Tensor:
        """(B, C, H); at padding positions, some token's state (unspecified)."""
        return hidden[self.predictor]


@dataclass(frozen=True)
class _LayerWeights:
    """One decoder layer's weights as the inference pass uses them (``LeanDecoder.fuse``)."""

    input_norm: torch.Tensor  # (H,)
    qkv: torch.Tensor  # (heads * D + 2 * kv_heads * D, H)
    qkv_bias: torch.Tensor | None
    output: torch.Tensor  # (H, heads * D)
    output_bias: torch.Tensor | None
    post_norm: torch.Tensor  # (H,)
    gate_up: torch.Tensor  # (2 * I, H)
    down: torch.Tensor  # (H, I)


def _caster(dtype: torch.dtype | None) -> Any:
    """A function casting a weight to ``dtype`` (a detached copy), or keeping it (None)."""
    return (lambda weight: weight) if dtype is None else (lambda weight: weight.detach().to(dtype))


def sampling_precision(model: Any, name: str | None, lean: LeanDecoder | None) -> torch.dtype | None:
    """The dtype an engine samples ``model`` in (``name``: "model", None, or a floating dtype's name)
    when it differs from the model's own, else None; another precision needs ``lean``."""
    if name is None or name == "model":
        return None
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise UserError(f"sample dtype {name!r}: use float32 or bfloat16")
    if dtype == next(model.parameters()).dtype:
        return None
    if lean is None:
        raise UserError(
            f"sampling in {name} needs the lean forward (Llama, Qwen2 or Mistral shapes, without LoRA); "
            "sample in the model's own precision instead"
        )
    return dtype


def _rope_theta(config: Any) -> float:
    parameters = getattr(config, "rope_parameters", None)
    if isinstance(parameters, dict):
        if parameters.get("rope_type", "default") != "default":
            raise ValueError("only default rotary embeddings are supported")
        return float(parameters["rope_theta"])
    if getattr(config, "rope_scaling", None):
        raise ValueError("only default rotary embeddings are supported")
    return float(getattr(config, "rope_theta", 10000.0))


def _rms_norm(hidden: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    if hidden.dtype == torch.float32:  # one fused op, the same values
        return F.rms_norm(hidden, (hidden.shape[-1],), weight, eps)
    variance = hidden.float().pow(2).mean(-1, keepdim=True)  # in fp32 whatever the dtype, as the model does
    return weight * (hidden.float() * torch.rsqrt(variance + eps)).to(hidden.dtype)
