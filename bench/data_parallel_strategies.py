"""ddp against fsdp: the same RL run as 2 torchrun ranks under each ``distributed.strategy``, side
by side, alternating, on the locally built tiny model (nothing is downloaded).

Each run trains ``--steps`` steps of 4 prompts x 4 samples on digit tasks; the figures are the
median ``time/update_s`` and ``time/step_s`` over every run's steps but its first (which warms
up). On CPU the ranks talk over gloo. Prints one JSON line.

    .venv/bin/python bench/data_parallel_strategies.py --repeats 3 --steps 8
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

STRATEGIES = ("ddp", "fsdp")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _config(root: Path) -> Path:
    from veriloop.core import Task, write_jsonl
    from veriloop.training import init_tiny_model

    verifier = {"kind": "regex", "pattern": r"\d", "mode": "search"}
    tasks = [Task(id=f"d{i}", domain="format", prompt=f"Write a digit, {i}.", verifier=verifier) for i in range(16)]
    write_jsonl(root / "tasks.jsonl", tasks)
    config = {
        "model": {"path": str(init_tiny_model(root / "model"))},
        "data": {"train": str(root / "tasks.jsonl")},
        "rollout": {"prompts_per_step": 4, "group_size": 4, "max_tokens": 8},
        "optim": {"lr": 2e-3, "warmup_steps": 1},
        "pipeline": {"torch_threads": 1},
        "run": {"checkpoint_every": 0, "loggers": ["jsonl"], "progress": False},
    }
    (root / "config.yaml").write_text(yaml.safe_dump(config))
    return root / "config.yaml"


def _run(config: Path, out: Path, strategy: str, steps: int) -> list[dict]:
    torchrun = Path(sys.executable).with_name("torchrun")
    command = [str(torchrun), "--nproc-per-node", "2", "--master-addr", "127.0.0.1"]
    command += ["--master-port", str(_free_port()), "-m", "veriloop", "train", str(config)]
    command += [f"run.out={out}", f"run.steps={steps}", f"distributed.strategy={strategy}"]
    subprocess.run(command, check=True, capture_output=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    lines = (out / "metrics.jsonl").read_text().splitlines()
    return [row for row in map(json.loads, lines) if "time/update_s" in row][1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rows: dict[str, list[dict]] = {strategy: [] for strategy in STRATEGIES}
    with tempfile.TemporaryDirectory() as scratch:
        config = _config(Path(scratch))
        for repeat in range(args.repeats):
            for strategy in STRATEGIES:
                rows[strategy] += _run(config, Path(scratch) / f"{strategy}-{repeat}", strategy, args.steps)
    result: dict[str, float | int] = {"ranks": 2, "steps_measured": len(rows["ddp"])}
    for strategy in STRATEGIES:
        for key in ("time/update_s", "time/step_s"):
            name = key.split("/")[1]
            result[f"{strategy}_{name}_median"] = round(statistics.median(r[key] for r in rows[strategy]), 4)
    result["fsdp_over_ddp_update"] = round(result["fsdp_update_s_median"] / result["ddp_update_s_median"], 2)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
