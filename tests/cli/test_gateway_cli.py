"""``veriloop gateway``: bad options are one-line user errors; the command serves and records an episode."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from openai import OpenAI

VERILOOP = Path(sys.executable).with_name("veriloop")


@pytest.mark.parametrize(
    "options, message",
    [
        (["--model", "no-such-dir"], "not a model directory"),
        (["--host", "0.0.0.0"], "without a token"),
        (["--token", " "], "token is empty"),
        (["--engine", "openai"], "use one of hf, vllm"),
        (["--max-body-mb", "0"], "must be above 0"),
    ],
    ids=["missing-model", "exposed-without-token", "empty-token", "text-engine", "body-cap"],
)
def test_bad_options_are_user_errors(run_cli, tiny_model_dir, options, message):
    model = [] if "--model" in options else ["--model", str(tiny_model_dir)]
    done = run_cli("gateway", *model, *options, timeout=60)
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [done.stderr.strip()], done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr


def test_a_port_in_use_is_a_user_error(run_cli, tiny_model_dir):
    with socket.create_server(("127.0.0.1", 0)) as taken:
        done = run_cli("gateway", "--model", str(tiny_model_dir), "--port", str(taken.getsockname()[1]), timeout=120)
    assert done.returncode == 2 and "cannot listen on 127.0.0.1" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.e2e
def test_the_command_serves_an_episode_and_records_it(tiny_model_dir, tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    record = tmp_path / "record"
    args = [str(VERILOOP), "gateway", "--model", str(tiny_model_dir), "--port", str(port), "--record", str(record)]
    server = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            assert server.poll() is None, server.stderr.read()
            try:
                if httpx.get(f"{base}/v1/models", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        openai = OpenAI(base_url=f"{base}/episodes/cli-1/v1", api_key="x", max_retries=0)
        answer = openai.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "Hi"}], max_tokens=4
        )
        assert httpx.post(f"{base}/v1/episodes/cli-1/finish").json()["calls"] == 1
        assert openai.models.list().data[0].id == tiny_model_dir.name
        openai.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "Left open"}], max_tokens=2)
    finally:
        server.terminate()
        server.wait(timeout=60)
    assert server.returncode == 0, server.stderr.read()
    lines = [json.loads(line) for line in (record / "episodes.jsonl").read_text().splitlines()]
    assert [line["id"] for line in lines] == ["cli-1", "cli-1"]  # the one left open is recorded at shutdown
    assert lines[0]["calls"][0]["text"] == answer.choices[0].message.content
    assert len(lines[0]["calls"][0]["sampled_token_ids"]) == 4
