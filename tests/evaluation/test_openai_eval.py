"""``run_eval`` against an OpenAI-compatible server on loopback that serves the tiny model."""

import socket
import threading
import time

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from veriloop.evaluation import load_run, run_eval
from veriloop.rollout import OpenAIEngine, SamplingParams
from veriloop.tasks import generate_tasks

KEY = "local-test-key"


def _loopback_socket() -> socket.socket:
    """A socket bound to a free loopback port and held, so no other process can take the port."""
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    return held


@pytest.fixture(scope="module")
def endpoint(tiny_engine):
    """``(base_url, log)``: chat completions from the tiny model, for requests bearing KEY only."""
    import uvicorn

    app, log = FastAPI(), {"answered": 0, "refused": 0}

    @app.post("/one/v1/chat/completions")
    async def one_choice(request: Request):  # a server that ignores n, as some do
        body = await request.json()
        log["single"] = log.get("single", 0) + 1
        return await chat(request, {**body, "n": 1})

    @app.post("/v1/chat/completions")
    async def chat(request: Request, body: dict | None = None):
        if request.headers.get("authorization") != f"Bearer {KEY}":
            log["refused"] += 1
            return JSONResponse({"error": "missing or wrong key"}, status_code=401)
        body = body or await request.json()
        params = SamplingParams(
            n=body["n"], temperature=body["temperature"], max_tokens=body["max_tokens"], seed=body.get("seed")
        )
        [samples] = await tiny_engine.agenerate([body["messages"]], params)
        log["answered"] += 1
        choices = [
            {
                "index": i,
                "message": {"role": "assistant", "content": s.text},
                "finish_reason": {"eos": "stop"}.get(s.finish_reason, "length"),
            }
            for i, s in enumerate(samples)
        ]
        generated = sum(len(s.token_ids) for s in samples)
        log["generated"] = log.get("generated", 0) + generated
        if body.get("logprobs") and len(samples) > 1:  # several choices: each counted by its log-probs
            for choice, sample in zip(choices, samples):
                choice["logprobs"] = {"content": [{"token": "t", "logprob": lp} for lp in sample.logprobs]}
        usage = {"prompt_tokens": 1, "completion_tokens": generated, "total_tokens": generated + 1}
        return {"object": "chat.completion", "model": body["model"], "choices": choices, "usage": usage}

    listening = _loopback_socket()
    server = uvicorn.Server(uvicorn.Config(app, log_level="error"))
    serving = threading.Thread(target=server.run, kwargs={"sockets": [listening]}, daemon=True)
    serving.start()
    for _ in range(600):
        if server.started:
            break
        time.sleep(0.05)
    host, port = listening.getsockname()
    yield f"http://{host}:{port}/v1", log
    server.should_exit = True
    serving.join(timeout=10)
    listening.close()


def test_eval_of_a_served_model(endpoint, tmp_path, monkeypatch):
    url, log = endpoint
    monkeypatch.setenv("EVAL_TEST_KEY", KEY)
    tasks = generate_tasks("arithmetic", seed=4, size=4)
    summary = run_eval(
        f"openai:tiny@{url}",
        tasks,
        samples=2,
        out=tmp_path / "served",
        max_tokens=6,
        seed=1,
        api_key_env="EVAL_TEST_KEY",
        record=False,
    )
    assert summary["engine"] == "openai" and summary["model"] == f"openai:tiny@{url}"
    assert summary["samples"] == 8 and summary["infra_errors"] == 0 and 0.0 <= summary["pass@1"] <= 1.0
    assert log["answered"] == 8 and log["refused"] == 0
    assert summary["tokens"]["completion"] == log["generated"] > 0  # counted by the server: usage, log-probs
    assert all(s.status == "scored" and s.detail for s in load_run(tmp_path / "served").samples)


def test_a_refused_or_unreachable_endpoint_is_infra_errors_not_failures(endpoint, tmp_path):
    url, log = endpoint
    tasks = generate_tasks("arithmetic", seed=4, size=3)
    refused_before = log["refused"]
    keyless = OpenAIEngine("tiny", url, api_key_env="EVAL_TEST_NO_SUCH_VARIABLE", max_retries=0)
    summary = run_eval(
        keyless, tasks, samples=2, out=tmp_path / "refused", record=False, export_failures=tmp_path / "f.jsonl"
    )
    assert log["refused"] - refused_before == 6
    assert summary["infra_errors"] == 6 and summary["scored_samples"] == 0 and summary["infra_error_tasks"] == 3
    assert summary["pass@1"] is None and summary["pass@1_ci"] == [0.0, 1.0] and summary["pass@k"] == {}
    assert summary["exported_failures"]["tasks"] == 0

    with _loopback_socket() as silent:  # bound but not listening: connections are refused
        host, port = silent.getsockname()
        gone = OpenAIEngine("tiny", f"http://{host}:{port}/v1", max_retries=0, timeout_s=5)
        summary = run_eval(gone, tasks, samples=1, out=tmp_path / "gone", record=False)
    assert summary["infra_errors"] == 3 and summary["pass@1"] is None
    cause = next(iter(summary["infra_error_details"]))
    assert cause.startswith("generation failed: ") and "engine returned an error" not in cause, cause  # the real cause


@pytest.mark.e2e
def test_eval_that_scored_nothing_exits_non_zero_with_the_cause(tmp_path, run_cli):
    from veriloop.core import write_jsonl

    tasks = tmp_path / "tasks.jsonl"
    write_jsonl(tasks, generate_tasks("arithmetic", seed=4, size=2))
    with _loopback_socket() as silent:  # bound but not listening: connections are refused
        host, port = silent.getsockname()
        done = run_cli(
            "eval",
            "--model",
            f"openai:tiny@http://{host}:{port}/v1",
            "--tasks",
            str(tasks),
            "--out",
            str(tmp_path / "down"),
        )
    assert done.returncode == 1, done.stderr
    assert "error: no sample was scored" in done.stderr and "generation failed: " in done.stderr
    summary = load_run(tmp_path / "down").summary
    assert summary["pass@1"] is None and summary["scored_samples"] == 0


def test_a_server_that_ignores_n_is_asked_once_per_missing_sample(endpoint, monkeypatch):
    url, log = endpoint
    monkeypatch.setenv("EVAL_TEST_KEY", KEY)
    engine = OpenAIEngine("tiny", url.replace("/v1", "/one/v1"), api_key_env="EVAL_TEST_KEY", max_retries=0)
    before = log.get("single", 0)
    [samples] = engine.generate(
        [[{"role": "user", "content": "What is 2 + 3?"}]], SamplingParams(n=4, max_tokens=6, seed=3)
    )
    assert log["single"] - before == 4 and len(samples) == 4
    assert all(s.finish_reason != "error" for s in samples), [s.error for s in samples]
    assert all(s.num_tokens > 0 for s in samples)  # each a response's only choice: counted by its usage
