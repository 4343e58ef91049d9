"""GGUF file -> Hugging Face model directory, so transformers loads the model without the file.

transformers reads a GGUF file itself (``from_pretrained(..., gguf_file=...)``), dequantising its
weights, but refuses to save the result, because its config carries a GGUF quantization entry.
``import_gguf`` loads the file that way, builds a plain model from the config less that entry,
loads the dequantised state dict into it (strictly: every key must match), casts it to the chosen
dtype and saves it with safetensors, beside the tokenizer (with its chat template) and a
generation config holding the bos, eos and pad ids.

The file's header is read first with the ``gguf`` package, so that a file that is not GGUF, an
architecture transformers cannot read or a tensor type it cannot dequantise is reported in one
line before the slow load. The model is written to a hidden sibling of ``out`` and renamed into
place at the end: a failure leaves nothing half-written.

Memory: the dequantised model and its plain copy are both held at once (two float copies).
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from veriloop.core import UserError
from veriloop.rollout import quiet_transformers

DTYPES = ("float32", "bfloat16")
# llama.cpp's names for some architectures, where transformers' GGUF loader renames them first.
_ARCHITECTURE_ALIASES = {
    "qwen2moe": "qwen2_moe",
    "qwen3moe": "qwen3_moe",
    "gpt-oss": "gpt_oss",
    "minimax-m2": "minimax_m2",
    "t5encoder": "t5",
}


@dataclass(frozen=True)
class GGUFHeader:
    """What the importer needs from a GGUF file's header (no tensor data is read)."""

    path: Path
    architecture: str  # general.architecture, e.g. "llama"
    name: str  # general.name, or the file's stem where the header has none
    tensor_types: tuple[str, ...]  # distinct ggml types of its tensors, e.g. ("F32", "Q4_1")


@dataclass(frozen=True)
class ImportedModel:
    """A model directory written by ``import_gguf``."""

    path: Path
    name: str  # general.name from the GGUF header
    model_type: str  # transformers' model type, e.g. "llama"
    parameters: int  # tied weights counted once
    dtype: str  # one of DTYPES

    def describe(self) -> str:
        """``SmolLM2, 134.5M parameters, float32``."""
        count = f"{self.parameters / 1e9:.2f}B" if self.parameters >= 1e9 else f"{self.parameters / 1e6:.1f}M"
        return f"{self.name}, {count} parameters, {self.dtype}"


def find_gguf(source: str | os.PathLike[str]) -> Path:
    """The GGUF file ``source`` names: the file itself, or the only ``.gguf`` in a directory."""
    path = Path(source)
    if path.is_dir():
        found = sorted(path.glob("*.gguf"))
        if len(found) != 1:
            names = ", ".join(p.name for p in found) or "none"
            raise UserError(f"{path}: a directory must hold exactly one .gguf file to import (found: {names})")
        return found[0]
    if not path.is_file():
        raise UserError(f"{path}: no such file or directory")
    return path


def _string_field(reader: Any, key: str) -> str | None:
    field = reader.fields.get(key)
    if field is None or not field.data:
        return None
    return bytes(field.parts[field.data[0]]).decode("utf-8", errors="replace")


def read_gguf_header(path: Path) -> GGUFHeader:
    """Read ``path``'s header; a file that is not GGUF or cannot be parsed is a UserError."""
    import gguf

    with path.open("rb") as handle:
        if handle.read(4) != b"GGUF":
            raise UserError(f"{path}: not a GGUF file (it does not begin with the bytes 'GGUF')")
    try:
        reader = gguf.GGUFReader(path)
    except (ValueError, IndexError, OSError) as error:
        raise UserError(f"{path}: a GGUF file that cannot be read ({error})") from error
    architecture = _string_field(reader, "general.architecture")
    if architecture is None:
        raise UserError(f"{path}: the GGUF header names no architecture (general.architecture)")
    types = sorted({tensor.tensor_type.name for tensor in reader.tensors})
    name = _string_field(reader, "general.name") or path.stem
    return GGUFHeader(path=path, architecture=architecture, name=name, tensor_types=tuple(types))


def readable_architectures() -> list[str]:
    """The GGUF architectures the installed transformers loads, sorted."""
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    names = set(GGUF_SUPPORTED_ARCHITECTURES) - {"general", "tokenizer"}  # metadata sections, not models
    with contextlib.suppress(ImportError):  # transformers 5.2x loads some architectures its own new way
        from transformers.integrations.gguf.gguf_conversion_mapping import GGUF_ARCHS

        names |= set(GGUF_ARCHS)
    return sorted(names)


def _dequantisable(type_name: str) -> bool:
    """Whether gguf's dequantiser (the one transformers calls) reads tensors of this ggml type."""
    import gguf
    import numpy as np

    kind = gguf.GGMLQuantizationType[type_name]
    _, block_bytes = gguf.GGML_QUANT_SIZES[kind]
    try:
        gguf.quants.dequantize(np.zeros(block_bytes, dtype=np.uint8), kind)  # one block of zeros
    except NotImplementedError:
        return False
    return True


def check_importable(header: GGUFHeader) -> None:
    """Raise a UserError naming what transformers cannot read in this file: its architecture or
    a tensor type; passes silently otherwise."""
    known = readable_architectures()
    architecture = _ARCHITECTURE_ALIASES.get(header.architecture, header.architecture)
    if architecture not in known:
        raise UserError(
            f"{header.path}: transformers cannot read GGUF architecture {header.architecture!r}; "
            f"it reads: {', '.join(known)}"
        )
    unreadable = [name for name in header.tensor_types if not _dequantisable(name)]
    if unreadable:
        raise UserError(
            f"{header.path}: transformers cannot dequantise tensor type {', '.join(unreadable)}; "
            "convert the model to another quantisation (Q8_0, Q4_K, F16, ...) first"
        )


def check_out(out: Path, force: bool) -> None:
    """``out`` may be written: absent, an empty directory, or any directory when ``force``."""
    if out.exists() and not out.is_dir():
        raise UserError(f"{out}: exists and is not a directory; choose another --out")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise UserError(f"{out}: exists and is not empty; choose another --out, or pass --force to replace it")


@contextlib.contextmanager
def staged_directory(out: Path, force: bool) -> Iterator[Path]:
    """Yield an empty hidden sibling of ``out``; on success it replaces ``out``, on an exception it
    is removed and ``out`` is left as it was."""
    check_out(out, force)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))
    try:
        staging.chmod(0o755)
        yield staging
        if out.exists():
            old = staging.with_suffix(".old")
            out.rename(old)  # replaced only once the new directory is whole
            staging.rename(out)
            shutil.rmtree(old)
        else:
            staging.rename(out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def check_dtype(dtype: str) -> str:
    """``dtype`` if it is one of DTYPES; a UserError listing them otherwise."""
    if dtype not in DTYPES:
        raise UserError(f"unknown dtype {dtype!r}; choose one of: {', '.join(DTYPES)}")
    return dtype


def _causal_config(header: GGUFHeader) -> Any:
    """transformers' config for the file; a UserError unless the model is a causal LM."""
    from transformers import AutoConfig
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    config = AutoConfig.from_pretrained(header.path.parent, gguf_file=header.path.name)
    if config.model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        raise UserError(
            f"{header.path}: a {config.model_type!r} model is not a causal language model; cannot import it"
        )
    return config


def _load_tokenizer(header: GGUFHeader, max_positions: int | None) -> Any:
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(header.path.parent, gguf_file=header.path.name)
    except ValueError as error:  # transformers' word for a tokenizer kind it cannot build
        raise UserError(f"{header.path}: transformers cannot build its tokenizer: {error}") from error
    if max_positions:
        tokenizer.model_max_length = max_positions
    return tokenizer


def _plain_model(header: GGUFHeader, config: Any, dtype: str) -> Any:
    """The dequantised weights in a model that ``save_pretrained`` accepts, cast to ``dtype``."""
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig, GgufConfig

    loaded = AutoModelForCausalLM.from_pretrained(
        header.path.parent,
        gguf_file=header.path.name,
        quantization_config=GgufConfig(dequantize=True),  # never keep packed blocks, even where kernels exist
    )
    plain_config = loaded.config
    if hasattr(plain_config, "quantization_config"):
        del plain_config.quantization_config
    plain = AutoModelForCausalLM.from_config(plain_config, dtype=getattr(torch, dtype))
    plain.load_state_dict(loaded.state_dict(), strict=True)  # tied weights: both keys hold one tensor
    pad = config.pad_token_id if config.pad_token_id is not None else config.eos_token_id
    plain.generation_config = GenerationConfig(
        bos_token_id=config.bos_token_id, eos_token_id=config.eos_token_id, pad_token_id=pad
    )
    return plain


def import_gguf(
    source: str | os.PathLike[str], out: str | os.PathLike[str], dtype: str = "float32", force: bool = False
) -> ImportedModel:
    """Write the model in ``source`` (a .gguf file, or a directory holding exactly one) to ``out``
    as a Hugging Face model directory: config.json, model.safetensors in ``dtype`` (one of DTYPES),
    the tokenizer files with the chat template, and generation_config.json.

    ``out`` must be absent or empty unless ``force``, which replaces it. Raises UserError for a
    missing file, a file that is not GGUF, an architecture or tensor type transformers cannot read,
    a model that is not a causal LM, or an ``out`` that may not be written.
    """
    check_dtype(dtype)
    target = Path(out)
    check_out(target, force)
    header = read_gguf_header(find_gguf(source))
    check_importable(header)
    quiet_transformers()
    # transformers' GGUF reader draws a tqdm bar of its own; veriloop's commands show theirs.
    with contextlib.redirect_stderr(io.StringIO()):
        config = _causal_config(header)
        tokenizer = _load_tokenizer(header, getattr(config, "max_position_embeddings", None))
        model = _plain_model(header, config, dtype)
    with staged_directory(target, force) as staging:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        for path in staging.iterdir():
            path.chmod(0o644)  # transformers writes the weights 0600; a model directory is shared
    return ImportedModel(
        path=target,
        name=header.name,
        model_type=config.model_type,
        parameters=sum(parameter.numel() for parameter in model.parameters()),
        dtype=dtype,
    )
