"""The gateway's cost per call, and a load run that checks no call is lost or mixed up.

(a) Overhead: the same chat call (same messages, seed and token budget) made through the
gateway over loopback and made on the engine directly in this process, one after the other,
``--calls`` rounds after a warm-up. Through the gateway with three clients: the standard
library's ``http.client`` on a kept-alive connection (little more than the gateway's own
cost), ``httpx``, and the ``openai`` client that agents use (each adds its own per-request
cost). The direct arm is ``engine.agenerate`` on one event loop (the path the gateway takes:
the engine's batcher and all) and, for reference, ``engine.generate``; both render and
tokenize the chat as the gateway does. Each round runs the arms in a rotated order, so each
arm follows each other one equally often (a call to a server that sat idle costs more than one
right after another). Each arm's median milliseconds per call; a client's
overhead is the median over rounds of its call less the direct ``agenerate`` call of the
same round, also as a share of the direct median. Every arm must sample the same tokens.

(b) Load: ``--episodes`` episodes at once, each of 2 or 3 chat calls (each call sends the
conversation so far, the replies the gateway returned included) through its own
``/episodes/ID/v1`` base URL, then finished over HTTP and collected. Counts the calls sent and
recorded, calls recorded in another episode than they were sent in, and calls that did not
continue their episode's previous call.

The gateway runs in a background thread of this process, as a trainer would run it; torch
uses ``--threads`` threads. The last line is JSON.

    .venv/bin/python bench/gateway.py [--calls 60] [--new-tokens 32] [--episodes 100] [--threads 1]
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import statistics
import tempfile
import time

import httpx
import torch
from openai import OpenAI

from veriloop.rollout import Gateway, SamplingParams, create_engine
from veriloop.training import init_tiny_model

MESSAGES = [{"role": "user", "content": "What is 17 + 25? Answer with the number."}]
CLIENTS = ("http.client", "httpx", "openai")  # the standard library's, and what agents are written with


def overhead(engine, gateway: Gateway, calls: int, new_tokens: int) -> dict:
    """Milliseconds per call of each arm, and of each client arm over the direct ``agenerate``."""
    params = SamplingParams(max_tokens=new_tokens, seed=11)
    body = {"model": "tiny", "messages": MESSAGES, "max_tokens": new_tokens, "seed": 11, "return_token_ids": True}
    payload = json.dumps(body)
    times: dict[str, list[float]] = {arm: [] for arm in ("agenerate", *CLIENTS, "generate")}
    tokens: dict[str, tuple[int, ...]] = {}

    async def direct() -> tuple[int, ...]:
        [[sample]] = await engine.agenerate([MESSAGES], params)
        return sample.token_ids

    def generate() -> tuple[int, ...]:
        [[sample]] = engine.generate([MESSAGES], params)
        return sample.token_ids

    connection = http.client.HTTPConnection("127.0.0.1", gateway.port)
    openai = OpenAI(base_url=gateway.base_url, api_key="unused", max_retries=0)
    with httpx.Client(base_url=gateway.base_url, timeout=60) as client, asyncio.Runner() as runner:

        def stdlib() -> tuple[int, ...]:
            connection.request("POST", "/v1/chat/completions", payload, {"Content-Type": "application/json"})
            return tuple(json.loads(connection.getresponse().read())["choices"][0]["token_ids"])

        def with_httpx() -> tuple[int, ...]:
            return tuple(
                client.post("/chat/completions", json=body).raise_for_status().json()["choices"][0]["token_ids"]
            )

        def with_openai() -> tuple[int, ...]:
            answer = openai.chat.completions.create(
                model="tiny", messages=MESSAGES, max_tokens=new_tokens, seed=11, extra_body={"return_token_ids": True}
            )
            return tuple(answer.choices[0].model_dump()["token_ids"])

        arms = {
            "agenerate": lambda: runner.run(direct()),
            "http.client": stdlib,
            "httpx": with_httpx,
            "openai": with_openai,
            "generate": generate,
        }
        names = list(arms)
        for round_ in range(calls + 3):  # three warm-up rounds
            for name in names[round_ % len(names) :] + names[: round_ % len(names)]:  # each arm follows each
                arm = arms[name]
                started = time.perf_counter()
                tokens[name] = arm()
                if round_ >= 3:
                    times[name].append(time.perf_counter() - started)
    connection.close()
    direct_ms = statistics.median(times["agenerate"]) * 1000
    result: dict = {
        "calls_per_arm": calls,
        "new_tokens": new_tokens,
        "engine_agenerate_ms_per_call": round(direct_ms, 3),
        "engine_generate_ms_per_call": round(statistics.median(times["generate"]) * 1000, 3),
    }
    for client in CLIENTS:
        # Per round, the client's call less the direct call of the same round: the machine's load
        # drifts between rounds far more than within one.
        extra_ms = statistics.median(c - a for c, a in zip(times[client], times["agenerate"])) * 1000
        name = client.replace(".", "_")
        result[f"gateway_{name}_ms_per_call"] = round(statistics.median(times[client]) * 1000, 3)
        result[f"overhead_{name}_ms_per_call"] = round(extra_ms, 3)
        result[f"overhead_{name}_share"] = round(extra_ms / direct_ms, 4)
    result["same_tokens"] = len(set(tokens.values())) == 1
    return result


async def load(gateway: Gateway, episodes: int, new_tokens: int) -> dict:
    """``episodes`` concurrent episodes of 2-3 calls; what came back and what was recorded."""
    limits = httpx.Limits(max_connections=episodes, max_keepalive_connections=episodes)
    async with httpx.AsyncClient(timeout=300, limits=limits) as http:

        async def episode(index: int) -> int:
            url = gateway.episode_url(f"load-{index}")
            history = [{"role": "user", "content": f"episode {index}: count to three."}]
            calls = 2 + index % 2
            for turn in range(calls):
                body = {"model": "tiny", "messages": history, "max_tokens": new_tokens, "seed": index * 10 + turn}
                answer = await http.post(f"{url}/chat/completions", json=body)
                answer.raise_for_status()
                history += [answer.json()["choices"][0]["message"], {"role": "user", "content": f"next {turn}"}]
            (await http.post(f"{url}/episodes/load-{index}/finish")).raise_for_status()
            return calls

        started = time.perf_counter()
        sent = await asyncio.gather(*(episode(i) for i in range(episodes)))
        wall = time.perf_counter() - started
    recorded = mixed = broken = 0
    for index in range(episodes):
        calls = gateway.finish(f"load-{index}").calls
        recorded += len(calls)
        mixed += sum(not call.messages[0]["content"].startswith(f"episode {index}:") for call in calls)
        broken += sum(later.extends != earlier.index for earlier, later in zip(calls, calls[1:]))
    return {
        "episodes": episodes,
        "calls_sent": sum(sent),
        "calls_recorded": recorded,
        "calls_lost": sum(sent) - recorded,
        "calls_in_another_episode": mixed,
        "calls_not_continuing_their_episode": broken,
        "load_wall_s": round(wall, 3),
        "load_calls_per_s": round(sum(sent) / wall, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=60, help="timed calls per arm")
    parser.add_argument("--new-tokens", type=int, default=32, help="tokens per call in the overhead arms")
    parser.add_argument("--episodes", type=int, default=100, help="concurrent episodes in the load run")
    parser.add_argument("--load-tokens", type=int, default=8, help="tokens per call in the load run")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="gateway-bench-") as scratch:
        engine = create_engine("hf", model=str(init_tiny_model(scratch)))
    with Gateway(engine, model_name="tiny") as gateway:
        result = {"bench": "gateway", "threads": args.threads}
        result.update(overhead(engine, gateway, args.calls, args.new_tokens))
        result.update(asyncio.run(load(gateway, args.episodes, args.load_tokens)))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
