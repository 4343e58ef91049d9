"""Multi-turn episodes: keys and values kept across turns against re-prefilling every turn.

The quickstart-sized model (1M parameters; positions raised to 4,096 so six long turns fit)
is first taught, by a short SFT on chats with short feedback, to answer in a few tokens and end its turn, so that
episodes run their six turns. Each episode: a question, then six model turns; after each, the
verifier rejects the answer and its feedback (a 300-token observation) goes back to the
model. Both modes run the same episodes with the same seeds, alternately, in one process;
their samples are compared token for token. Torch runs on ``--threads`` threads (one by
default: on a shared machine, a thread pool spinning against other processes costs more
than the work of this small model). The last line is JSON.

    .venv/bin/python bench/multiturn.py [--episodes 8] [--repeats 5] [--threads 1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time

import torch
from rich.progress import Progress

from veriloop.core import Response, Score, Task
from veriloop.rollout import EpisodeConfig, HFEngine, StopConfig, run_episode
from veriloop.training import TinyModelSpec, init_tiny_model, train_sft

TURNS = 6
OBSERVATION_TOKENS = 300


def observation_text(tokenizer, tokens: int) -> str:
    """Feedback text of exactly ``tokens`` tokens."""
    words = " ".join(f"check {i} failed: expected {i * 7 % 100} got {i * 3 % 100}." for i in range(400))
    ids = tokenizer.encode(words, add_special_tokens=False)[:tokens]
    text = tokenizer.decode(ids)
    assert len(tokenizer.encode(text, add_special_tokens=False)) == tokens
    return text


def taught_engine(scratch: str) -> tuple[HFEngine, str]:
    """The model (written under ``scratch``) after a short SFT on six-turn chats of short answers
    and long feedback, and that feedback."""
    directory = init_tiny_model(scratch, TinyModelSpec(max_positions=4096))
    engine = HFEngine(str(directory))
    feedback = observation_text(engine.tokenizer, OBSERVATION_TOKENS)
    short = observation_text(engine.tokenizer, 24)  # short feedback keeps the SFT cheap
    chats = []
    for question in range(6):
        chat = [{"role": "user", "content": f"What is {question} + {question + 1}?"}]
        for turn in range(TURNS):
            chat += [{"role": "assistant", "content": f"{question * 2 + turn}"}, {"role": "tool", "content": short}]
        chats.append(chat[:-1])
    train_sft(engine.model, engine.tokenizer, chats, steps=40, batch_size=2, lr=3e-3, seed=0)
    engine.model.eval()
    return engine, feedback


async def reject(task: Task, response: Response, feedback: str) -> Score:
    return Score(id=task.id, task_id=task.id, reward=0.0, passed=False, feedback=feedback)


def run_episodes(engine: HFEngine, config: EpisodeConfig, tasks: list[Task], feedback: str) -> tuple[float, int, list]:
    """Wall seconds, prefill tokens and the trajectories of one episode per task, one after another."""

    async def verify(task: Task, response: Response) -> Score:
        return await reject(task, response, feedback)

    async def main() -> list:
        return [await run_episode(task, engine, config, verify, seed=1000 + i) for i, task in enumerate(tasks)]

    prefilled = engine.prefill_tokens
    started = time.perf_counter()
    trajectories = asyncio.run(main())
    return time.perf_counter() - started, engine.prefill_tokens - prefilled, trajectories


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="multiturn-") as scratch:
        engine, feedback = taught_engine(scratch)
    tasks = [
        Task(id=f"q{i}", domain="bench", prompt=f"What is {i} + {i + 1}?", verifier={"kind": "exact"}, gold="x")
        for i in range(args.episodes)
    ]
    base = dict(max_tokens_per_turn=16, feedback_on_fail=True, stop=StopConfig(max_turns=TURNS, max_total_tokens=8192))
    modes = {"reuse": EpisodeConfig(**base, reuse_kv=True), "reprefill": EpisodeConfig(**base, reuse_kv=False)}
    times: dict[str, list[float]] = {mode: [] for mode in modes}
    prefill: dict[str, int] = {}
    samples: dict[str, list] = {}
    with Progress(transient=True) as progress:
        bar = progress.add_task("rounds (reuse, then re-prefill)", total=2 * (args.repeats + 1))
        for repeat in range(args.repeats + 1):  # the first round warms up
            for mode, config in modes.items():
                seconds, tokens, trajectories = run_episodes(engine, config, tasks, feedback)
                if repeat:
                    times[mode].append(seconds)
                prefill[mode], samples[mode] = tokens, trajectories
                progress.advance(bar)
    turns = [sum(turn.role == "assistant" for turn in t.turns) for t in samples["reuse"]]
    same = [a.completion_ids == b.completion_ids for a, b in zip(samples["reuse"], samples["reprefill"])]
    largest_gap = max(
        (abs(x - y) for a, b in zip(samples["reuse"], samples["reprefill"]) for x, y in zip(a.logprobs, b.logprobs)),
        default=0.0,
    )
    reuse_s, reprefill_s = (statistics.median(times[m]) / args.episodes for m in ("reuse", "reprefill"))
    result = {
        "episodes": args.episodes,
        "turns_per_episode": statistics.mean(turns),
        "observation_tokens": OBSERVATION_TOKENS,
        "repeats": args.repeats,
        "threads": args.threads,
        "reuse_s_per_episode": round(reuse_s, 4),
        "reprefill_s_per_episode": round(reprefill_s, 4),
        "wall_ratio": round(reuse_s / reprefill_s, 3),
        "prefill_tokens_reuse": prefill["reuse"] // args.episodes,
        "prefill_tokens_reprefill": prefill["reprefill"] // args.episodes,
        "prefill_ratio": round(prefill["reuse"] / prefill["reprefill"], 3),
        "same_tokens_episodes": f"{sum(same)}/{len(same)}",
        "max_abs_logprob_gap": largest_gap,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
