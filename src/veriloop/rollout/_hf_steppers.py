"""The ``hf`` engine's two ways through a model, behind one interface: prefill a batch's
distinct items (``plan_prefill``: a group's shared prompt once, a session's new tokens after the
keys and values it kept), then decode one token per live row. ``HFStepper`` runs the model
itself with a transformers KV cache; ``LeanStepper`` runs the lean decoder (``_lean``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from veriloop.rollout._kv_sessions import LayerKV
from veriloop.rollout._lean import LeanDecoder

Row = tuple[Sequence[int], int | None, str | None]  # prompt ids, seed, session


@dataclass
class Prefill:
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


def plan_prefill(engine: Any, rows: Sequence[Row], device: Any) -> Prefill:
    """What ``engine`` (an ``HFEngine``: its sessions, pad token and policy version) prefills
    for ``rows`` on ``device``."""
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
    return Prefill(
        input_ids.to(device),
        attention.to(device),
        positions.to(device),
        reused_mask.to(device),
        tuple((k.to(device), v.to(device)) for k, v in reused),
        torch.tensor(row_item, device=device),
    )


class HFStepper:
    """Prefill and decode through the model itself, with a transformers KV cache."""

    def __init__(self, model: Any):
        from transformers import DynamicCache

        self.model = model
        self.cache = DynamicCache()
        self.cache_arg = cache_argument(model)

    def prefill(self, plan: Prefill, max_new: int) -> Any:
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


class LeanStepper:
    """Prefill and decode through ``LeanDecoder`` with a preallocated KV cache."""

    def __init__(self, lean: LeanDecoder, dtype: Any = None):
        self.lean = lean
        lean.fuse(dtype)  # the weights may have changed since the last batch

    def close(self) -> None:
        self.lean.unfuse()

    def prefill(self, plan: Prefill, max_new: int) -> Any:
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


def cache_argument(model: Any) -> str:
    """The forward() keyword for the KV cache: newer transformers renamed past_key_values."""
    import inspect

    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # a peft wrapper passes kwargs on
    return "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"
