"""A tiny Llama model and byte-level BPE tokenizer, written as a GGUF file the way llama.cpp's
converter writes one, for the tests of ``veriloop model import`` and ``model fetch``.

llama.cpp stores each attention head's q and k rows interleaved for its rotary embedding
(``permute`` below, from its convert_hf_to_gguf.py); transformers' GGUF loader undoes that for
llama (``LlamaTensorProcessor._reverse_permute_weights``). Other tensors are stored as they are.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")  # ids 0, 1, 2
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
RMS_EPS = 2.0**-17  # exact in float32, so the config read back from the file is the same number
_LAYER_NAMES = {
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ffn_norm",
}
_CORPUS = [
    "What is 12 + 7? The answer is 19.",
    "the model writes the answer and then checks the total",
    "def add(a, b):\n    return a + b",
    "Hello world, hello tokenizer.",
] * 20


def tiny_tokenizer() -> Any:
    """A byte-level BPE tokenizer of about 300 tokens, with the three ChatML special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(_CORPUS, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=CHAT_TEMPLATE,
    )


def tiny_llama(tokenizer: Any, tie: bool = True, seed: int = 0) -> Any:
    """A random float32 Llama model: hidden 64, 2 layers, 4 heads, 2 kv heads."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        rms_norm_eps=RMS_EPS,
        rope_theta=10000.0,
        tie_word_embeddings=tie,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():  # random norm weights, so a mix-up of the norms would show in the logits
        for name, parameter in model.named_parameters():
            if name.endswith("norm.weight"):
                parameter.uniform_(0.5, 1.5)
    return model


def permute(weights: np.ndarray, n_head: int, n_head_kv: int | None) -> np.ndarray:
    """llama.cpp's row order for q and k (convert_hf_to_gguf.py, LlamaModel.permute)."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    shape = weights.shape
    return weights.reshape(n_head, 2, shape[0] // n_head // 2, *shape[1:]).swapaxes(1, 2).reshape(shape)


def gguf_tensors(model: Any) -> dict[str, np.ndarray]:
    """The model's weights under llama.cpp's names, q and k rows permuted, float32."""
    config = model.config
    tensors = {}
    for name, tensor in model.state_dict().items():
        array = tensor.detach().float().numpy().copy()
        if name == "lm_head.weight":
            if not config.tie_word_embeddings:
                tensors["output.weight"] = array
            continue
        if name == "model.embed_tokens.weight":
            tensors["token_embd.weight"] = array
        elif name == "model.norm.weight":
            tensors["output_norm.weight"] = array
        else:
            _, _, layer, module = name.removesuffix(".weight").split(".", 3)
            gguf_name = _LAYER_NAMES[module]
            if gguf_name == "attn_q":
                array = permute(array, config.num_attention_heads, config.num_attention_heads)
            elif gguf_name == "attn_k":
                array = permute(array, config.num_attention_heads, config.num_key_value_heads)
            tensors[f"blk.{layer}.{gguf_name}.weight"] = array
    return tensors


def _vocabulary(tokenizer: Any) -> tuple[list[str], list[int], list[str]]:
    """Tokens by id, their llama.cpp token types (1 normal, 3 control), and the merges."""
    by_id = sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])
    tokens = [token for token, _ in by_id]
    assert [index for _, index in by_id] == list(range(len(tokens)))
    types = [3 if token in SPECIAL_TOKENS else 1 for token in tokens]
    merges = json.loads(tokenizer.backend_tokenizer.to_str())["model"]["merges"]
    merges = [merge if isinstance(merge, str) else " ".join(merge) for merge in merges]
    return tokens, types, merges


def write_gguf(
    path: Path,
    model: Any,
    tokenizer: Any,
    quantize: str = "F32",
    architecture: str = "llama",
    name: str = "tiny-llama",
) -> Path:
    """Write ``model`` and ``tokenizer`` to ``path`` as llama.cpp would: 2-D weights in the ggml
    type ``quantize`` (``F32``, ``Q8_0``, ..., or ``F64``, which nothing dequantises), norms in F32."""
    import gguf

    config = model.config
    writer = gguf.GGUFWriter(path, architecture)
    writer.add_name(name)
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_rope_dimension_count(config.hidden_size // config.num_attention_heads)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_layer_norm_rms_eps(RMS_EPS)
    writer.add_rope_freq_base(10000.0)
    writer.add_vocab_size(config.vocab_size)
    tokens, types, merges = _vocabulary(tokenizer)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(config.bos_token_id)
    writer.add_eos_token_id(config.eos_token_id)
    writer.add_pad_token_id(config.pad_token_id)
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHAT_TEMPLATE)
    kind = gguf.GGMLQuantizationType[quantize]
    for tensor_name, array in gguf_tensors(model).items():
        if array.ndim == 1 or kind == gguf.GGMLQuantizationType.F32:
            writer.add_tensor(tensor_name, array)
        elif kind == gguf.GGMLQuantizationType.F64:
            writer.add_tensor(tensor_name, array.astype(np.float64))
        else:
            writer.add_tensor(tensor_name, gguf.quants.quantize(array, kind), raw_dtype=kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def dequantised_copy(model: Any, quantize: str) -> Any:
    """A copy of ``model`` whose 2-D weights went through ``quantize`` and back: what an import of
    the file ``write_gguf(..., quantize=quantize)`` holds."""
    import copy

    import gguf
    import torch

    kind = gguf.GGMLQuantizationType[quantize]
    twin = copy.deepcopy(model)
    with torch.no_grad():
        for parameter in twin.parameters():
            if parameter.ndim == 2:
                array = parameter.numpy()
                parameter.copy_(torch.from_numpy(gguf.quants.dequantize(gguf.quants.quantize(array, kind), kind)))
    return twin
