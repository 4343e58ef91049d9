"""The gateway: a real server on a loopback port over the tiny model, driven by the real openai client."""

from __future__ import annotations

import asyncio
import importlib.util
import json

import httpx
import pytest
from openai import AsyncOpenAI, OpenAI

from veriloop.core import UserError
from veriloop.rollout import (
    Gateway,
    GatewayLimits,
    SamplingParams,
    create_engine,
    episode_trajectory,
)

QUESTION = [{"role": "user", "content": "What is 2 + 2?"}]


@pytest.fixture(scope="module")
def engine(tiny_model_dir):
    return create_engine("hf", model=str(tiny_model_dir))


@pytest.fixture
def gateway(engine, tmp_path):
    with Gateway(engine, record_dir=tmp_path / "record", model_name="tiny") as served:
        yield served


def client(url: str, api_key: str = "unused", **options) -> OpenAI:
    return OpenAI(base_url=url, api_key=api_key, max_retries=0, **options)


def recorded_lines(gateway: Gateway) -> list[dict]:
    path = gateway.book.record_path
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_chat_answer_is_the_engines_sample_and_its_tokens_are_recorded(gateway, engine):
    answer = client(gateway.base_url).chat.completions.create(
        model="tiny", messages=QUESTION, max_tokens=8, seed=3, logprobs=True, extra_headers={"X-Episode-Id": "e1"}
    )
    [call] = gateway.finish("e1").calls
    prompt = engine.encode_prompt(QUESTION)
    [[direct]] = engine.generate([prompt], SamplingParams(max_tokens=8, seed=3))
    assert call.prompt_token_ids == tuple(prompt) and call.sampled_token_ids == direct.token_ids
    assert call.logprobs == pytest.approx(direct.logprobs, abs=1e-5)
    choice = answer.choices[0]
    assert choice.message.content == direct.text == call.text and choice.finish_reason == "length"
    assert [t.logprob for t in choice.logprobs.content] == list(call.logprobs)
    assert answer.usage.prompt_tokens == len(prompt) and answer.usage.completion_tokens == 8
    assert call.messages == tuple(QUESTION) and call.policy_version == 0 and call.extends is None


def test_completions_take_text_or_token_ids_and_record_every_choice(gateway, engine):
    openai = client(gateway.episode_url("c1"))
    by_text = openai.completions.create(model="tiny", prompt="What is", max_tokens=5, n=2, seed=7, logprobs=1)
    ids = engine.tokenizer("What is")["input_ids"]
    by_ids = openai.completions.create(model="tiny", prompt=ids, max_tokens=5, n=2, seed=7)
    assert [c.text for c in by_text.choices] == [c.text for c in by_ids.choices]
    assert len(by_text.choices) == 2 and len(by_text.choices[0].logprobs.token_logprobs) == 5
    calls = gateway.finish("c1").calls
    assert [(c.request, c.choice, c.endpoint) for c in calls] == [(0, 0, "completions"), (0, 1, "completions")] + [
        (1, 0, "completions"),
        (1, 1, "completions"),
    ]
    assert calls[0].prompt == "What is" and calls[0].prompt_token_ids == tuple(ids) and calls[2].prompt is None
    assert [c.text for c in calls[:2]] == [c.text for c in by_text.choices]


def test_models_lists_the_served_name(gateway):
    models = client(gateway.base_url).models.list()
    assert [m.id for m in models.data] == ["tiny"]
    assert client(gateway.base_url).models.retrieve("tiny").id == "tiny"


def test_an_episode_base_url_needs_no_header_and_finishes_over_http(gateway):
    openai = client(gateway.episode_url("agent-7"))
    for seed in (1, 2):
        openai.chat.completions.create(model="tiny", messages=QUESTION, max_tokens=4, seed=seed)
    finished = httpx.post(f"{gateway.base_url}/episodes/agent-7/finish")
    assert finished.status_code == 200 and finished.json() == {
        "id": "agent-7",
        "object": "episode",
        "requests": 2,
        "calls": 2,
    }
    assert httpx.post(f"{gateway.base_url}/episodes/agent-7/finish").status_code == 404
    assert len(gateway.finish("agent-7").calls) == 2  # held for the trainer, handed over once
    assert gateway.finish("agent-7").calls == ()
    [line] = recorded_lines(gateway)
    assert line["id"] == "agent-7" and [c["request"] for c in line["calls"]] == [0, 1]


def test_a_request_naming_no_episode_is_an_episode_of_its_own(engine, tmp_path):
    finished = []
    with Gateway(engine, record_dir=tmp_path, on_finish=finished.append) as gateway:
        answer = httpx.post(
            f"{gateway.base_url}/chat/completions", json={"messages": QUESTION, "max_tokens": 3, "seed": 0}
        )
    episode_id = answer.headers["x-episode-id"]
    assert episode_id.startswith("anon-") and [e.id for e in finished] == [episode_id]
    assert len(finished[0].calls) == 1 and finished[0].calls[0].sampled_token_ids
    assert [json.loads(line)["id"] for line in (tmp_path / "episodes.jsonl").read_text().splitlines()] == [episode_id]


def test_episodes_jsonl_holds_what_each_call_saw_and_returned(gateway):
    openai = client(gateway.base_url, default_headers={"X-Episode-Id": "rec"})
    tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
    answer = openai.chat.completions.create(
        model="tiny",
        messages=QUESTION,
        tools=tools,
        max_tokens=6,
        seed=5,
        logprobs=True,
        extra_body={"return_token_ids": True},
    )
    httpx.post(f"{gateway.base_url}/episodes/rec/finish")
    [line] = recorded_lines(gateway)
    [call] = line["calls"]
    assert line["id"] == "rec" and call["messages"] == QUESTION and call["tools"] == tools
    choice = answer.model_dump()["choices"][0]
    assert call["sampled_token_ids"] == choice["token_ids"] and call["text"] == choice["message"]["content"]
    assert call["logprobs"] == [t["logprob"] for t in choice["logprobs"]["content"]]
    assert call["prompt_token_ids"] == answer.model_dump()["prompt_token_ids"]
    assert call["policy_version"] == 0 and call["finish_reason"] == "length"


def _non_canonical_turn(engine) -> int:
    """A seed whose 12-token reply to QUESTION tokenizes, as text, to other ids than were sampled."""
    prompt = engine.encode_prompt(QUESTION)
    for seed in range(50):
        [[sample]] = engine.generate([prompt], SamplingParams(max_tokens=12, seed=seed))
        if engine.tokenizer.encode(sample.text, add_special_tokens=False) != list(sample.token_ids):
            return seed
    raise AssertionError("no seed gave a reply whose text tokenizes differently")


def test_a_continued_conversation_trains_the_sampled_ids_not_a_retokenisation(engine, tmp_path):
    seed = _non_canonical_turn(engine)
    versions = iter([0, 3])
    with Gateway(engine, policy_version=lambda: next(versions)) as gateway:
        openai = client(gateway.episode_url("exact"))
        first = openai.chat.completions.create(model="tiny", messages=QUESTION, max_tokens=12, seed=seed)
        history = [
            *QUESTION,
            first.choices[0].message.model_dump(exclude_none=True),
            {"role": "user", "content": "And 3 + 3?"},
        ]
        openai.chat.completions.create(model="tiny", messages=history, max_tokens=5, seed=1)
        episode = gateway.finish("exact")
    one, two = episode.calls
    assert two.extends == one.index and two.split is None and (one.policy_version, two.policy_version) == (0, 3)
    assert two.prompt_token_ids[: len(one.prompt_token_ids) + 12] == one.prompt_token_ids + one.sampled_token_ids
    naive = engine.encode_prompt(history)  # the whole conversation rendered and tokenized afresh
    assert list(two.prompt_token_ids) != naive

    trajectory = episode_trajectory(episode, reward=1.0, tokenizer=engine.tokenizer)
    assert trajectory.prompt_ids == one.prompt_token_ids and trajectory.segments == ()
    trained = [t for t, m in zip(trajectory.completion_ids, trajectory.loss_mask) if m]
    assert trained == [*one.sampled_token_ids, *two.sampled_token_ids]
    assert (*trajectory.prompt_ids, *trajectory.completion_ids) == two.prompt_token_ids + two.sampled_token_ids
    assert [lp for lp, m in zip(trajectory.logprobs, trajectory.loss_mask) if m] == [*one.logprobs, *two.logprobs]
    assert all(lp == 0.0 for lp, m in zip(trajectory.logprobs, trajectory.loss_mask) if not m)
    assert trajectory.policy_version == 0 and trajectory.metadata["gateway"]["policy_versions"] == [0, 3]
    observation = trajectory.turns[1]
    assert observation.role == "observation" and "And 3 + 3?" in observation.text


def test_an_edited_history_starts_a_new_context_and_trains_each_token_once(gateway):
    openai = client(gateway.episode_url("edit"))
    first = openai.chat.completions.create(model="tiny", messages=QUESTION, max_tokens=4, seed=1)
    history = [*QUESTION, first.choices[0].message, {"role": "user", "content": "More."}]  # the client's own object
    openai.chat.completions.create(model="tiny", messages=history, max_tokens=4, seed=2)
    edited = [*QUESTION, {"role": "assistant", "content": "4"}, {"role": "user", "content": "More."}]
    openai.chat.completions.create(model="tiny", messages=edited, max_tokens=4, seed=3)
    episode = gateway.finish("edit")
    assert [(c.extends, c.split) for c in episode.calls] == [(None, None), (0, None), (None, "history_changed")]

    trajectory = episode_trajectory(episode)
    contexts = trajectory.contexts()
    assert len(contexts) == 2 and trajectory.metadata["gateway"]["split_reasons"] == ["history_changed"]
    assert contexts[1].prompt_ids == episode.calls[2].prompt_token_ids
    trained = [[t for t, m in zip(c.completion_ids, c.loss_mask) if m] for c in contexts]
    assert trained == [
        [*episode.calls[0].sampled_token_ids, *episode.calls[1].sampled_token_ids],
        list(episode.calls[2].sampled_token_ids),
    ]


def test_a_trajectory_follows_the_choice_the_agent_continued(gateway):
    openai = client(gateway.episode_url("fork"))
    first = openai.chat.completions.create(model="tiny", messages=QUESTION, max_tokens=4, seed=1, n=2)
    picked = first.choices[1].message.model_dump(exclude_none=True)
    openai.chat.completions.create(
        model="tiny", messages=[*QUESTION, picked, {"role": "user", "content": "Go on."}], max_tokens=4
    )
    episode = gateway.finish("fork")
    assert [(c.request, c.choice, c.extends) for c in episode.calls] == [(0, 0, None), (0, 1, None), (1, 0, 1)]
    trajectory = episode_trajectory(episode)
    assert trajectory.segments == () and trajectory.metadata["gateway"]["choices_left_out"] == 1
    assert trajectory.completion_ids[:4] == episode.calls[1].sampled_token_ids


def test_streamed_chat_carries_the_same_answer(gateway):
    openai = client(gateway.episode_url("stream"))
    whole = openai.chat.completions.create(model="tiny", messages=QUESTION, max_tokens=6, seed=9)
    chunks = list(
        openai.chat.completions.create(
            model="tiny", messages=QUESTION, max_tokens=6, seed=9, stream=True, stream_options={"include_usage": True}
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content and chunks[-1].usage.completion_tokens == 6
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    assert len(gateway.finish("stream").calls) == 2


def test_concurrent_episodes_keep_their_calls_apart(gateway):
    async def episode(openai: AsyncOpenAI, index: int) -> None:
        history = [{"role": "user", "content": f"episode {index}"}]
        for turn in range(2):
            answer = await openai.chat.completions.create(model="tiny", messages=history, max_tokens=3, seed=index)
            history += [
                answer.choices[0].message.model_dump(exclude_none=True),
                {"role": "user", "content": f"turn {turn}"},
            ]

    async def run() -> None:
        async with AsyncOpenAI(base_url=gateway.base_url, api_key="x", max_retries=0) as openai:
            await asyncio.gather(
                *(episode(openai.with_options(default_headers={"X-Episode-Id": f"par-{i}"}), i) for i in range(8))
            )

    asyncio.run(run())
    for index in range(8):
        calls = gateway.finish(f"par-{index}").calls
        assert len(calls) == 2 and all(c.messages[0]["content"] == f"episode {index}" for c in calls)
        assert calls[1].extends == calls[0].index


def _error(response: httpx.Response) -> dict:
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}, body
    return body["error"]


@pytest.mark.parametrize(
    "body, param",
    [
        (b"{not json", None),
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "wizard", "content": "hi"}]}, "messages.0.role"),
        ({"messages": QUESTION, "n": 99}, "n"),
        ({"messages": QUESTION, "max_tokens": 10**6}, "max_tokens"),
        ({"messages": QUESTION, "max_tokens": 2000}, "messages"),
        ({"messages": QUESTION, "presence_penalty": 0.5}, "presence_penalty"),
        ({"messages": QUESTION, "temperature": -1}, "temperature"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]}, "messages.0.content"),
    ],
    ids=["not-json", "no-messages", "bad-role", "n", "max-tokens", "context", "penalty", "temperature", "image"],
)
def test_a_malformed_request_is_a_400_in_openais_shape_and_records_nothing(gateway, body, param):
    send = {"content": body} if isinstance(body, bytes) else {"json": body}
    response = httpx.post(f"{gateway.base_url}/chat/completions", headers={"X-Episode-Id": "bad"}, **send)
    assert response.status_code == 400, response.text
    error = _error(response)
    assert error["type"] == "invalid_request_error" and error["param"] == param
    assert gateway.finish("bad").calls == () and gateway.book.open_ids() == []
    gateway.close()
    assert recorded_lines(gateway) == []


def test_other_refusals_are_openai_shaped_too(gateway):
    headers = {"X-Episode-Id": "x y"}
    assert (
        _error(httpx.post(f"{gateway.base_url}/chat/completions", headers=headers, json={"messages": QUESTION}))[
            "param"
        ]
        == "X-Episode-Id"
    )
    assert _error(httpx.get(f"{gateway.base_url}/nowhere"))["code"] == "not_found"
    assert _error(httpx.get(f"{gateway.base_url}/models/gpt-4o"))["code"] == "model_not_found"
    assert httpx.get(gateway.base_url.replace("/v1", "/episodes/bad id/v1/models")).status_code == 400
    conflicting = httpx.post(
        f"{gateway.episode_url('a')}/chat/completions", headers={"X-Episode-Id": "b"}, json={"messages": QUESTION}
    )
    assert conflicting.status_code == 400 and "b" in _error(conflicting)["message"]
    assert gateway.book.open_ids() == []


def test_an_episode_is_not_finished_while_a_call_is_being_answered():
    import threading

    from veriloop.rollout._gateway_episodes import EpisodeBook
    from veriloop.rollout._gateway_records import GatewayCall

    book = EpisodeBook()
    episode, number = book.begin("busy")
    with pytest.raises(ValueError, match="1 calls being answered"):
        book.finish("busy")
    call = GatewayCall(index=0, request=number, prompt_token_ids=(1, 2), sampled_token_ids=(3,))
    threading.Timer(0.2, book.end, args=(episode, [(call, None)])).start()
    collected = book.collect("busy", timeout_s=30)  # waits for the call, then finishes
    assert [c.sampled_token_ids for c in collected.calls] == [(3,)] and book.open_ids() == []
    book.begin("slow")
    with pytest.raises(TimeoutError):
        book.collect("slow", timeout_s=0.05)


def test_a_body_over_the_cap_is_a_413(engine):
    with Gateway(engine, limits=GatewayLimits(max_body_bytes=2000)) as gateway:
        big = [{"role": "user", "content": "x" * 3000}]
        response = httpx.post(f"{gateway.episode_url('big')}/chat/completions", json={"messages": big})
        assert response.status_code == 413 and _error(response)["code"] == "request_too_large"
        assert gateway.finish("big").calls == ()


def test_a_token_is_required_when_set(engine):
    with Gateway(engine, token="s3cret-token") as gateway:
        refused = httpx.post(f"{gateway.base_url}/chat/completions", json={"messages": QUESTION})
        assert refused.status_code == 401 and _error(refused)["code"] == "invalid_api_key"
        wrong = client(gateway.base_url, api_key="other")
        with pytest.raises(Exception, match="401"):
            wrong.models.list()
        answer = client(gateway.base_url, api_key="s3cret-token").chat.completions.create(
            model="tiny", messages=QUESTION, max_tokens=2
        )
        assert answer.choices[0].finish_reason == "length"


def test_listening_beyond_loopback_needs_a_token(engine):
    with pytest.raises(UserError, match="without a token"):
        Gateway(engine, host="0.0.0.0")
    with pytest.raises(UserError, match="empty"):
        Gateway(engine, token=" ")


@pytest.mark.scale
@pytest.mark.vllm
@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="needs vLLM: make setup-vllm, run with .venv-vllm")
def test_the_gateway_serves_the_vllm_engine(tiny_model_dir):
    engine = create_engine("vllm", model=str(tiny_model_dir), kv_cache_bytes=64 * 2**20, max_model_len=512)
    try:
        with Gateway(engine) as gateway:
            openai = client(gateway.episode_url("vllm"))
            first = openai.chat.completions.create(model="tiny", messages=QUESTION, max_tokens=6, seed=3)
            history = [
                *QUESTION,
                first.choices[0].message.model_dump(exclude_none=True),
                {"role": "user", "content": "?"},
            ]
            openai.chat.completions.create(model="tiny", messages=history, max_tokens=6, seed=4)
            one, two = gateway.finish("vllm").calls
        [[direct]] = engine.generate([list(one.prompt_token_ids)], SamplingParams(max_tokens=6, seed=3))
        assert one.sampled_token_ids == direct.token_ids and two.extends == one.index
    finally:
        engine.close()
