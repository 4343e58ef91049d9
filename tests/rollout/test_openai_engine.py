"""The openai engine against a real OpenAI-compatible server on loopback serving the tiny model."""

import socket
import threading
import time

import pytest

from veriloop.core import UserError
from veriloop.rollout import OpenAIEngine, SamplingParams, parse_endpoint


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tiny_engine):
    """A chat-completions server backed by the hf engine; fails the first request of each 'flaky' model."""
    import uvicorn
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse

    app = FastAPI()
    seen = {"requests": 0, "flaky_failures": 0}

    @app.post("/v1/chat/completions")
    async def complete(request: Request):
        body = await request.json()
        seen["requests"] += 1
        if body["model"] == "flaky" and seen["flaky_failures"] < 1:
            seen["flaky_failures"] += 1
            return JSONResponse({"error": "overloaded"}, status_code=503)
        if body["model"] == "broken":
            return JSONResponse({"error": "bad request"}, status_code=400)
        params = SamplingParams(
            n=body.get("n", 1),
            temperature=body.get("temperature", 1.0),
            top_p=body.get("top_p", 1.0),
            max_tokens=body.get("max_tokens", 16),
            seed=body.get("seed"),
        )
        samples = (await tiny_engine.agenerate([body["messages"]], params))[0]
        return {
            "choices": [
                {
                    "index": i,
                    "message": {"role": "assistant", "content": s.text},
                    "finish_reason": "stop" if s.finish_reason == "eos" else "length",
                    "logprobs": {
                        "content": [{"token": str(t), "logprob": lp} for t, lp in zip(s.token_ids, s.logprobs)]
                    },
                }
                for i, s in enumerate(samples)
            ]
        }

    port = _free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error")
    uv = uvicorn.Server(config)
    thread = threading.Thread(target=uv.run, daemon=True)
    thread.start()
    deadline = time.time() + 20
    while not uv.started and time.time() < deadline:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/v1", seen
    uv.should_exit = True
    thread.join(timeout=10)


def test_samples_from_a_served_model(server):
    url, _ = server
    engine = OpenAIEngine(model="tiny", base_url=url, concurrency=4)
    prompts = [[{"role": "user", "content": f"What is {i} + 1?"}] for i in range(5)]
    results = engine.generate(prompts, SamplingParams(n=2, max_tokens=8, seed=1))
    assert len(results) == 5 and all(len(r) == 2 for r in results)
    for sample in (s for r in results for s in r):
        assert sample.finish_reason in ("eos", "length") and sample.logprobs
        assert sample.token_ids == ()


def test_retries_a_503_then_succeeds(server):
    url, seen = server
    engine = OpenAIEngine(model="flaky", base_url=url, backoff_s=0.01)
    [[sample]] = engine.generate([[{"role": "user", "content": "hi"}]], SamplingParams(max_tokens=4))
    assert seen["flaky_failures"] == 1
    assert sample.finish_reason != "error"


def test_a_client_error_becomes_an_error_sample_not_an_exception(server):
    url, _ = server
    engine = OpenAIEngine(model="broken", base_url=url, backoff_s=0.01)
    [[sample]] = engine.generate([[{"role": "user", "content": "hi"}]], SamplingParams(max_tokens=4))
    assert sample.finish_reason == "error" and "HTTP 400" in sample.error


def test_unreachable_server_is_an_error_sample():
    engine = OpenAIEngine(
        model="m", base_url=f"http://127.0.0.1:{_free_port()}/v1", max_retries=1, backoff_s=0.01, timeout_s=2
    )
    [[sample]] = engine.generate([[{"role": "user", "content": "hi"}]], SamplingParams(max_tokens=4))
    assert sample.finish_reason == "error" and "Connect" in sample.error


def test_endpoint_spec():
    assert parse_endpoint("openai:qwen@http://127.0.0.1:8000/v1/") == ("qwen", "http://127.0.0.1:8000/v1")
    with pytest.raises(UserError, match="expected openai:MODEL@"):
        parse_endpoint("openai:qwen")
