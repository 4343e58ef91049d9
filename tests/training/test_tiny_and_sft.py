import json

import pytest
import yaml


def test_tokenizer_round_trips_through_autotokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    from veriloop.training import TinyModelSpec
    from veriloop.training._tiny_model import build_tokenizer

    built = build_tokenizer(TinyModelSpec())
    loaded = AutoTokenizer.from_pretrained(tiny_model_dir)
    samples = [
        "What is 12 + 7 - 3?",
        "  café naïve ﬁ Å A\u030a",
        "def f(x):\n\treturn x\r\n",
        "<|im_start|>user\nhi<|im_end|>\n",
        "日本語 😀 don't",
        "-1234567890",
        "x" * 300,
    ]
    for text in samples:
        ids = built.encode(text, add_special_tokens=False)
        assert loaded.encode(text, add_special_tokens=False) == ids, text
        assert loaded.decode(ids) == built.decode(ids)
    assert [loaded.convert_ids_to_tokens(i) for i in loaded.encode("2026", add_special_tokens=False)] == [
        "2",
        "0",
        "2",
        "6",
    ]
    chat = [{"role": "user", "content": "hi"}]
    assert (
        loaded.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
        == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    )
    assert loaded.eos_token == "<|im_end|>" and loaded.pad_token == "<|endoftext|>"


@pytest.mark.e2e
def test_init_tiny_command(tmp_path, run_cli):
    result = run_cli("model", "init-tiny", "--out", str(tmp_path / "m"))
    assert result.returncode == 0, result.stderr
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tmp_path / "m")
    assert model.config.model_type == "qwen2" and 0.5e6 < model.num_parameters() < 2e6


def test_sft_lowers_loss_on_assistant_tokens_only(tiny_model_dir):
    from veriloop.rollout import create_engine
    from veriloop.training import tokenize_conversation, train_sft

    engine = create_engine("hf", model=str(tiny_model_dir))
    chats = [
        [{"role": "user", "content": f"What is {i} + 1?"}, {"role": "assistant", "content": str(i + 1)}]
        for i in range(40)
    ]
    ids, mask = tokenize_conversation(engine.tokenizer, chats[3])
    assistant = [t for t, m in zip(ids, mask) if m]
    assert engine.tokenizer.decode(assistant) == "4<|im_end|>"
    history = train_sft(engine.model, engine.tokenizer, chats, steps=40, batch_size=8, lr=3e-3, warmup_steps=2)
    first = sum(s.loss for s in history[:5]) / 5
    last = sum(s.loss for s in history[-5:]) / 5
    assert last < first * 0.6, (first, last)


@pytest.mark.e2e
def test_sft_command_writes_a_loadable_model(tmp_path, tiny_model_dir, run_cli):
    data = tmp_path / "sft.jsonl"
    data.write_text(
        "".join(
            json.dumps({"messages": [{"role": "user", "content": f"{i}?"}, {"role": "assistant", "content": str(i)}]})
            + "\n"
            for i in range(8)
        )
    )
    config = tmp_path / "sft.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "model": {"path": str(tiny_model_dir)},
                "data": {"train": str(data)},
                "optim": {"steps": 3, "batch_size": 4},
                "run": {"out": str(tmp_path / "out"), "progress": False},
            }
        )
    )
    result = run_cli("sft", str(config), "optim.lr=0.002")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out" / "model.safetensors").exists()


@pytest.mark.parametrize(
    "content, override, message",
    [
        ("model: [1, 2\n", None, "line 2: not valid YAML"),
        ("optim:\n  steps: 0\n", None, "field 'optim.steps'"),
        ("optim:\n  stpes: 3\n", None, "unknown field 'optim.stpes'"),
        ("{}\n", "optim=3", "use SECTION.FIELD=VALUE"),
    ],
)
@pytest.mark.e2e
def test_bad_configs_are_one_line_errors(tmp_path, run_cli, content, override, message):
    config = tmp_path / "bad.yaml"
    config.write_text(content)
    result = run_cli("sft", str(config), *([override] if override else []))
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr


@pytest.mark.e2e
def test_bad_sft_rows_are_reported_by_line(tmp_path, tiny_model_dir, run_cli):
    data = tmp_path / "sft.jsonl"
    data.write_text(
        '{"messages": [{"role": "user", "content": "a"}]}\n{"messages": [{"role": "robot", "content": "b"}]}\n'
    )
    config = tmp_path / "sft.yaml"
    config.write_text(yaml.safe_dump({"model": {"path": str(tiny_model_dir)}, "data": {"train": str(data)}}))
    result = run_cli("sft", str(config))
    assert result.returncode == 2
    assert f"{data}: line 2:" in result.stderr


def test_saved_models_ask_servers_to_sample(tiny_model_dir, tmp_path):
    """Without do_sample in generation_config.json, transformers serve and vLLM decode greedily."""
    import json

    from veriloop.training._config import ModelSection
    from veriloop.training._model import load_policy, save_final

    assert json.loads((tiny_model_dir / "generation_config.json").read_text())["do_sample"] is True
    model, tokenizer = load_policy(ModelSection(path=str(tiny_model_dir)))
    model.generation_config.do_sample = False
    save_final(model, tokenizer, tmp_path / "final")
    assert json.loads((tmp_path / "final" / "generation_config.json").read_text())["do_sample"] is True
