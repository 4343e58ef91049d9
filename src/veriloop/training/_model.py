"""Loading the policy (optionally with LoRA) and its frozen reference."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from veriloop.core import UserError
from veriloop.rollout import load_model_and_tokenizer
from veriloop.training._config import ModelSection


def load_policy(section: ModelSection, weights_from: Path | None = None) -> tuple[Any, Any]:
    """The trainable policy and its tokenizer. ``weights_from`` is a checkpoint's model directory."""
    if not section.path:
        raise UserError("model.path: give the model directory to train (e.g. runs/quickstart/base)")
    full_weights = weights_from if weights_from is not None and section.lora_rank == 0 else None
    model, tokenizer = load_model_and_tokenizer(full_weights or section.path, section.device, section.dtype)
    if section.lora_rank > 0:
        from peft import LoraConfig, PeftModel, get_peft_model

        if weights_from is not None:
            model = PeftModel.from_pretrained(model, str(weights_from), is_trainable=True)
        else:
            lora = LoraConfig(
                r=section.lora_rank,
                lora_alpha=section.lora_alpha,
                lora_dropout=section.lora_dropout,
                target_modules="all-linear",
                task_type="CAUSAL_LM",
            )
            model = get_peft_model(model, lora)
    model.config.use_cache = True
    return model, tokenizer


def reference_model(policy: Any, section: ModelSection) -> Any:
    """A frozen copy of the starting policy (with LoRA, the base model: adapters disabled)."""
    if section.lora_rank > 0:
        return None  # computed by disabling the adapters on the policy itself
    reference = copy.deepcopy(policy)
    reference.eval()
    for parameter in reference.parameters():
        parameter.requires_grad_(False)
    return reference


def mark_as_sampling_policy(model: Any) -> None:
    """Record ``do_sample`` in the model's generation config: without it, servers that read the file
    (``transformers serve``, vLLM) decode greedily whatever temperature a request asks for."""
    if getattr(model, "generation_config", None) is not None:
        model.generation_config.do_sample = True


def save_final(model: Any, tokenizer: Any, out: Path, state_dict: dict[str, Any] | None = None) -> Path:
    """Save the policy as a plain HF model directory (LoRA adapters merged into a copy);
    ``state_dict``, when given, holds the weights to save in place of the model's own."""
    to_save = model
    if hasattr(model, "merge_and_unload"):
        to_save = copy.deepcopy(model).merge_and_unload()
    out.mkdir(parents=True, exist_ok=True)
    mark_as_sampling_policy(to_save)
    to_save.save_pretrained(out, state_dict=state_dict)
    tokenizer.save_pretrained(out)
    return out
