"""Batches per rollout: the engines' batchers waiting for requests that trickle in, or not.

A rollout of ``--prompts`` tasks x ``--group-size`` samples through ``rollout()`` (the trainer's
path: episodes bounded by ``--concurrency``, each verified on the verification threads) with
the ``hf`` engine on a locally built tiny model. When a batch ends, its episodes come back one
at a time and the waiting episodes follow them; a batcher that takes what is queued after one
pass of the event loop samples the first of them alone, a full run of ``--new-tokens`` decode
steps, and the rest in later batches. Two arms in the same process, run alternately:

- ``one_pass``: ``GATHER_STEPS = 0`` (the batch takes what one pass of the loop queued);
- ``gather``: the default (wait in 1 ms steps while requests still arrive, 20 steps at most).

Per arm: the batches of each rollout, the median rollout seconds and generated tokens/s; then
``same_samples`` (each round's seed gave both arms the same tokens) and ``speedup`` (one_pass
seconds / gather seconds). On a GPU a decode step costs about the same
for 1 row as for 256 (launch-bound), so every extra batch costs a whole run of decode steps.

    .venv/bin/python bench/batching.py [--prompts 64] [--group-size 8] [--concurrency 256] [--rounds 5] [--device cuda]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

from veriloop.core import Task
from veriloop.rollout import EpisodeConfig, HFEngine, rollout
from veriloop.rollout import _engine
from veriloop.training import init_tiny_model


class CountingEngine(HFEngine):
    """The hf engine, counting the batches it samples and their rows."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.batches: list[int] = []

    def sample_rows(self, rows, params, max_tokens=None):
        self.batches.append(len(rows))
        return super().sample_rows(rows, params, max_tokens)


def one_rollout(engine: CountingEngine, tasks: list[Task], args: argparse.Namespace, steps: int, seed: int) -> dict:
    _engine.GATHER_STEPS = steps
    engine.batches = []
    config = EpisodeConfig(max_tokens_per_turn=args.new_tokens, temperature=1.0)
    started = time.perf_counter()
    batch = rollout(tasks, engine, config, group_size=args.group_size, concurrency=args.concurrency, seed=seed)
    seconds = time.perf_counter() - started
    samples = [t.completion_ids for t in batch.trajectories]
    return {"batches": list(engine.batches), "seconds": seconds, "samples": samples}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    args = parser.parse_args()
    default_steps = _engine.GATHER_STEPS
    tasks = [
        Task(
            id=f"t{i}", domain="bench", prompt=f"Say a number after {i}.", verifier={"kind": "regex", "pattern": r"\d"}
        )
        for i in range(args.prompts)
    ]
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as directory:
        init_tiny_model(directory)
        engine = CountingEngine(directory, device=args.device, max_batch_size=args.concurrency)
        arms = {"one_pass": 0, "gather": default_steps}
        for steps in arms.values():  # warm-up: imports, the verification threads, kernels
            one_rollout(engine, tasks, args, steps, seed=0)
        runs: dict[str, list[dict]] = {name: [] for name in arms}
        for round_index in range(args.rounds):
            for name, steps in arms.items():
                runs[name].append(one_rollout(engine, tasks, args, steps, seed=1 + round_index))
    _engine.GATHER_STEPS = default_steps
    result: dict = {"bench": "batching", "device": args.device, "prompts": args.prompts, "group_size": args.group_size}
    result |= {"concurrency": args.concurrency, "new_tokens": args.new_tokens, "rounds": args.rounds}
    for name, arm in runs.items():
        seconds = statistics.median(r["seconds"] for r in arm)
        result[name] = {
            "batches_per_rollout": statistics.median(len(r["batches"]) for r in arm),
            "batch_rows": [r["batches"] for r in arm],
            "rollout_s": round(seconds, 3),
            "tokens_per_s": round(statistics.median(sum(map(len, r["samples"])) / r["seconds"] for r in arm), 1),
        }
    # The same seeds sample the same tokens however the rows were batched.
    result["same_samples"] = all(a["samples"] == b["samples"] for a, b in zip(runs["one_pass"], runs["gather"]))
    result["speedup"] = round(result["one_pass"]["rollout_s"] / result["gather"]["rollout_s"], 2)
    result["load_average_1m"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    print(json.dumps(result))


if __name__ == "__main__":
    main()
