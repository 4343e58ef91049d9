"""Tools through the gateway: the tool-call format read from model text, tools shown by a template
that reads them or by the fallback block, and a model that learnt to call a tool, end to end."""

from __future__ import annotations

import json
import shutil

import pytest
from openai import OpenAI

from veriloop.rollout import Gateway, create_engine, episode_trajectory, parse_tool_calls, tools_block

ADD = {
    "type": "function",
    "function": {"name": "add", "description": "Add two numbers", "parameters": {"type": "object"}},
}
WEATHER = {"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}
# A ChatML template that reads `tools` and renders assistant tool calls in the Hermes convention.
TOOL_TEMPLATE = (
    "{%- if tools %}<|im_start|>system\ntools:{% for tool in tools %} {{ tool.function.name }}{% endfor %}"
    "<|im_end|>\n{% endif %}"
    "{%- for message in messages %}<|im_start|>{{ message.role }}\n{{ message.content }}"
    "{%- for call in message.tool_calls or [] %}<tool_call>"
    "{{ {'name': call.function.name, 'arguments': call.function.arguments} | tojson }}</tool_call>{% endfor %}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def test_tool_calls_are_read_from_the_hermes_tags():
    text = 'Let me add.\n<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>'
    content, [call] = parse_tool_calls(text)
    assert content == "Let me add." and call["type"] == "function" and call["id"].startswith("call_")
    assert call["function"] == {"name": "add", "arguments": '{"a": 1, "b": 2}'}

    content, calls = parse_tool_calls(
        '<tool_call>\n{"name": "a", "parameters": {"x": 1}}\n</tool_call><tool_call>{"name": "b", "arguments": "{}"}</tool_call>'
    )
    assert content is None and [(c["function"]["name"], c["function"]["arguments"]) for c in calls] == [
        ("a", '{"x": 1}'),
        ("b", "{}"),
    ]
    assert len({c["id"] for c in calls}) == 2


@pytest.mark.parametrize(
    "text",
    [
        "<tool_call>{not json}</tool_call>",
        '<tool_call>{"arguments": {}}</tool_call>',
        '<tool_call>{"name": "a"',
        "plain",
    ],
)
def test_text_that_is_no_tool_call_stays_content(text):
    assert parse_tool_calls(text) == (text, [])


@pytest.fixture(scope="module")
def engine(tiny_model_dir):
    return create_engine("hf", model=str(tiny_model_dir))


def _prompt_text(gateway: Gateway, engine, episode: str) -> str:
    [call] = gateway.finish(episode).calls
    return engine.tokenizer.decode(list(call.prompt_token_ids), skip_special_tokens=False)


def test_a_template_without_tools_gets_the_fallback_block_and_tool_call_lines(engine):
    history = [
        {"role": "user", "content": "What is 1 + 2?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "3"},
    ]
    with Gateway(engine) as gateway:
        openai = OpenAI(base_url=gateway.episode_url("fallback"), api_key="x", max_retries=0)
        openai.chat.completions.create(model="m", messages=history, tools=[ADD, WEATHER], max_tokens=2)
        text = _prompt_text(gateway, engine, "fallback")
        assert text.startswith(f"<|im_start|>system\n{tools_block([ADD, WEATHER])}<|im_end|>\n")
        assert json.dumps(ADD["function"]) in text
        assert (
            '<|im_start|>assistant\n<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call><|im_end|>'
            in text
        )
        assert text.endswith("<|im_start|>tool\n3<|im_end|>\n<|im_start|>assistant\n")

        openai.chat.completions.create(
            model="m", messages=history, tools=[ADD, WEATHER], tool_choice="none", max_tokens=2
        )
        assert "<tools>" not in _prompt_text(gateway, engine, "fallback")
        named = {"type": "function", "function": {"name": "weather"}}
        openai.chat.completions.create(
            model="m", messages=history, tools=[ADD, WEATHER], tool_choice=named, max_tokens=2
        )
        shown = _prompt_text(gateway, engine, "fallback")
        assert '"name": "weather"' in shown and '"name": "add", "description"' not in shown


def test_a_template_that_reads_tools_renders_them_itself(tiny_model_dir):
    engine = create_engine("hf", model=str(tiny_model_dir))
    engine.tokenizer.chat_template = TOOL_TEMPLATE
    with Gateway(engine) as gateway:
        openai = OpenAI(base_url=gateway.episode_url("native"), api_key="x", max_retries=0)
        openai.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "Hi"}], tools=[ADD], max_tokens=2
        )
        text = _prompt_text(gateway, engine, "native")
    assert text == "<|im_start|>system\ntools: add<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def tool_engine(tiny_model_dir, tmp_path_factory):
    """The tiny model taught (by a short SFT on CPU) to answer a weather question with a tool call,
    and the tool's result with a sentence; its template reads tools."""
    from veriloop.training import train_sft

    directory = tmp_path_factory.mktemp("tool-model")
    shutil.copytree(tiny_model_dir, directory, dirs_exist_ok=True)
    engine = create_engine("hf", model=str(directory))
    engine.tokenizer.chat_template = TOOL_TEMPLATE
    call = '<tool_call>{"name": "weather", "arguments": {"city": "Paris"}}</tool_call>'
    chat = [
        {"role": "system", "content": "tools: weather"},  # what the template shows for tools=[WEATHER]
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": call},
        {"role": "tool", "content": "sunny"},
        {"role": "assistant", "content": "It is sunny."},
    ]
    train_sft(engine.model, engine.tokenizer, [chat], steps=40, batch_size=1, lr=3e-3, seed=0)
    engine.model.eval()
    return engine


@pytest.mark.e2e
def test_an_agent_gets_tool_calls_and_its_tool_results_continue_the_context(tool_engine):
    with Gateway(tool_engine) as gateway:
        openai = OpenAI(base_url=gateway.episode_url("weather"), api_key="x", max_retries=0)
        messages = [{"role": "user", "content": "Weather in Paris?"}]
        first = openai.chat.completions.create(
            model="m", messages=messages, tools=[WEATHER], temperature=0, max_tokens=80
        )
        choice = first.choices[0]
        assert choice.finish_reason == "tool_calls" and choice.message.content is None
        [call] = choice.message.tool_calls
        assert call.function.name == "weather" and json.loads(call.function.arguments) == {"city": "Paris"}
        messages += [
            choice.message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "sunny"},
        ]
        second = openai.chat.completions.create(
            model="m", messages=messages, tools=[WEATHER], temperature=0, max_tokens=20
        )
        assert second.choices[0].message.content == "It is sunny."
        episode = gateway.finish("weather")
    one, two = episode.calls
    assert two.extends == one.index and one.message["tool_calls"][0]["function"]["name"] == "weather"
    trajectory = episode_trajectory(episode, tokenizer=tool_engine.tokenizer)
    assert [turn.role for turn in trajectory.turns] == ["assistant", "observation", "assistant"]
    assert trajectory.turns[0].tool == "weather" and "sunny" in trajectory.turns[1].text
