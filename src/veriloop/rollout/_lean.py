"""A lean forward pass for Llama-family decoders (Qwen2, Llama, Mistral shapes).

transformers' modules spend most of a small model's step in Python bookkeeping (mask
builders, cache objects, hooks). This computes the same function with a handful of tensor
ops on the model's own parameters, so gradients still reach them and weight updates need no
copy. Used by the ``hf`` engine's sampler and by the trainer's log-prob pass whenever
``LeanDecoder.supports(model)``; otherwise both use the model itself. Tests check that its
logits equal the model's.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

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
        self._fused: list[tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]] | None = None
        self.q_size = self.heads * self.head_dim
        self.kv_size = self.kv_heads * self.head_dim

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

    def fuse(self) -> None:
        """Concatenate q/k/v and gate/up weights for inference (fewer, larger matmuls).

        Call again after the weights change; ``unfuse`` returns to the live parameters.
        """
        with torch.no_grad():
            self._fused = [self._fused_weights(layer) for layer in self.layers]

    @staticmethod
    def _fused_weights(layer: Any) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
        attention, mlp = layer.self_attn, layer.mlp
        qkv = torch.cat([attention.q_proj.weight, attention.k_proj.weight, attention.v_proj.weight])
        biases = [attention.q_proj.bias, attention.k_proj.bias, attention.v_proj.bias]
        qkv_bias = torch.cat(biases) if all(b is not None for b in biases) else None
        gate_up = torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight])
        return qkv, qkv_bias, gate_up

    def unfuse(self) -> None:
        self._fused = None

    def new_cache(self, batch: int, length: int, like: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Preallocated (key, value) per layer: (B, kv_heads, length, head_dim)."""
        shape = (batch, self.kv_heads, length, self.head_dim)
        return [(like.new_zeros(shape), like.new_zeros(shape)) for _ in self.layers]

    def forward(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        key_mask: torch.Tensor,
        cache: list[tuple[torch.Tensor, torch.Tensor]] | None = None,
        cache_start: int = 0,
        last_only: bool = False,
        select: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Logits (B, T, V); (B, 1, V) with ``last_only``; (B, K, V) at positions ``select`` (B, K).

        ``input_ids``/``positions``: (B, T). ``key_mask``: (B, S) bool, which key slots hold
        real tokens, S = cache_start + T (or T without a cache). With a cache, the new keys
        and values are written at slots ``cache_start ... cache_start + T - 1``.
        """
        hidden = self.embed(input_ids)  # (B, T, H)
        batch, steps, _ = hidden.shape
        freqs = positions[..., None].float() * self.inv_freq.to(hidden.device)  # (B, T, D/2)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = emb.cos().to(hidden.dtype)[:, None]  # (B, 1, T, D)
        # rotate_half(x) * sin == roll(x, D/2) * [-sin, sin]: one roll instead of slices and a cat.
        sin = torch.cat((-freqs.sin(), freqs.sin()), dim=-1).to(hidden.dtype)[:, None]
        keys_len = key_mask.shape[1]
        query_slots = torch.arange(cache_start, cache_start + steps, device=hidden.device)
        slots = torch.arange(keys_len, device=hidden.device)[None, :]
        causal = slots <= query_slots[:, None]  # (T, S)
        # A padding query sees at least its own slot, so no attention row is empty (no NaNs).
        mask = (causal[None, None] & key_mask[:, None, None, :]) | (slots == query_slots[:, None])[None, None]  # (B, 1, T, S)
        for index, layer in enumerate(self.layers):
            attention = layer.self_attn
            normed = _rms_norm(hidden, layer.input_layernorm.weight, self.eps)
            fused = self._fused[index] if self._fused is not None else None
            if fused is not None:
                q, k, v = F.linear(normed, fused[0], fused[1]).split([self.q_size, self.kv_size, self.kv_size], dim=-1)
            else:
                q, k, v = attention.q_proj(normed), attention.k_proj(normed), attention.v_proj(normed)
            q = q.reshape(batch, steps, self.heads, self.head_dim).transpose(1, 2)
            k = k.reshape(batch, steps, self.kv_heads, self.head_dim).transpose(1, 2)
            v = v.reshape(batch, steps, self.kv_heads, self.head_dim).transpose(1, 2)
            half = self.head_dim // 2
            q, k = q * cos + q.roll(half, -1) * sin, k * cos + k.roll(half, -1) * sin
            if cache is not None:
                key_cache, value_cache = cache[index]
                key_cache[:, :, cache_start : cache_start + steps] = k
                value_cache[:, :, cache_start : cache_start + steps] = v
                k, v = key_cache[:, :, :keys_len], value_cache[:, :, :keys_len]
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=self.kv_heads != self.heads)
            hidden = hidden + attention.o_proj(out.transpose(1, 2).reshape(batch, steps, -1))
            normed = _rms_norm(hidden, layer.post_attention_layernorm.weight, self.eps)
            mlp = layer.mlp
            if fused is not None:
                gate, up = F.linear(normed, fused[2]).chunk(2, dim=-1)
            else:
                gate, up = mlp.gate_proj(normed), mlp.up_proj(normed)
            hidden = hidden + mlp.down_proj(F.silu(gate) * up)
        if last_only:
            hidden = hidden[:, -1:]
        elif select is not None:
            hidden = hidden.gather(1, select[:, :, None].expand(-1, -1, hidden.shape[-1]))
        return self.lm_head(_rms_norm(hidden, self.norm.weight, self.eps))


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
    variance = hidden.float().pow(2).mean(-1, keepdim=True)
    return weight * (hidden.float() * torch.rsqrt(variance + eps)).to(hidden.dtype)
