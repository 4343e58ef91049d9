"""A tiny, locally built base model: a byte-level BPE tokenizer and a small Qwen2 causal LM.

Nothing is downloaded. The tokenizer splits every digit into its own token (as Qwen2's
pre-tokenizer does), carries a ChatML chat template, and is saved so that
``AutoTokenizer.from_pretrained`` loads it back unchanged (the tokenizer class is recorded
explicitly, so transformers does not rebuild it as its own Qwen2 tokenizer).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from veriloop.training._model import mark_as_sampling_policy

# The pattern of Qwen2's pre-tokenizer, with single digits (\p{N}) as their own pieces.
_SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
_WORDS = (
    "what is the answer of to a and in it for print return def if else while value result "
    "number sum total compute first then so we get final check code python error test pass "
    "fail input output table row column revenue cost profit year quarter plus minus times"
).split()


@dataclass(frozen=True)
class TinyModelSpec:
    """Shape of the tiny model. The defaults give about one million parameters."""

    vocab_size: int = 320
    hidden_size: int = 128
    num_layers: int = 4
    num_heads: int = 4
    num_kv_heads: int = 2
    intermediate_size: int = 512
    max_positions: int = 1024
    seed: int = 0


def _corpus(seed: int, lines: int = 4000) -> list[str]:
    """Generated text with the shapes the tiny model will see: arithmetic, words, code."""
    rng = random.Random(seed)
    corpus = []
    for _ in range(lines):
        a, b, c = (rng.randint(0, 999) for _ in range(3))
        op = rng.choice(["+", "-", "*"])
        words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(3, 10)))
        corpus += [
            f"What is {a} {op} {b}? The answer is {c}.",
            words.capitalize() + rng.choice([".", "?", ":", "!"]),
            f"def f(x):\n    return x {op} {b}\nprint(f({a}))",
            f"Answer: {c}\n",
        ]
    return corpus


def build_tokenizer(spec: TinyModelSpec):
    """Train the byte-level BPE tokenizer; returns a transformers fast tokenizer."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    # NFC as in Qwen2's tokenizer: transformers loads a Qwen2 model's tokenizer as its own
    # Qwen2 tokenizer class, which normalises to NFC; ours must agree to round-trip exactly.
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(_SPLIT_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=spec.vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_corpus(spec.seed), trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        chat_template=CHAT_TEMPLATE,
        model_max_length=spec.max_positions,
    )


def init_tiny_model(out_dir: str | Path, spec: TinyModelSpec | None = None) -> Path:
    """Build the tokenizer and a randomly initialised Qwen2 model; save both in HF format."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from veriloop.rollout import quiet_transformers

    quiet_transformers()
    spec = spec or TinyModelSpec()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(spec)
    torch.manual_seed(spec.seed)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_kv_heads,
        intermediate_size=spec.intermediate_size,
        max_position_embeddings=spec.max_positions,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    model = Qwen2ForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    mark_as_sampling_policy(model)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
