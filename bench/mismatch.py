"""The engine-vs-trainer mismatch and what each ``algorithm.correction`` mode does with it: the
same RL run once per mode, side by side in one process, on the same seed.

Without ``--config`` the run is the locally built tiny model on digit tasks (nothing is
downloaded), 4 prompts x 4 samples a step; ``--config`` runs any training config instead (the
quickstart model's, with ``rollout.engine=vllm`` among the overrides, measures vLLM's gap). Extra
``SECTION.FIELD=VALUE`` overrides apply to every run, e.g. ``rollout.dtype=bfloat16`` samples from
a bfloat16 snapshot of the weights. Per mode: the means over the steps of the ``mismatch/``
metrics, the last steps' sampled reward and the median step time. Prints one JSON line.

    .venv/bin/python bench/mismatch.py --steps 6 rollout.dtype=bfloat16
    .venv-vllm/bin/python bench/mismatch.py --config quickstart.yaml --steps 20 rollout.engine=vllm
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

import yaml

MODES = ("none", "token_tis", "token_mask", "sequence_tis", "sequence_mask")
REPORTED = (
    "mismatch/abs_logprob_diff_mean",
    "mismatch/abs_logprob_diff_max",
    "mismatch/kl_k3",
    "mismatch/weight_mean",
    "mismatch/masked_token_fraction",
    "mismatch/capped_token_fraction",
    "mismatch/masked_sequence_fraction",
)


def _tiny_config(root: Path) -> Path:
    from veriloop.core import Task, write_jsonl
    from veriloop.training import init_tiny_model

    verifier = {"kind": "regex", "pattern": r"\d", "mode": "search"}
    tasks = [Task(id=f"d{i}", domain="format", prompt=f"Write a digit, {i}.", verifier=verifier) for i in range(16)]
    write_jsonl(root / "tasks.jsonl", tasks)
    config = {
        "model": {"path": str(init_tiny_model(root / "model"))},
        "data": {"train": str(root / "tasks.jsonl")},
        "rollout": {"prompts_per_step": 4, "group_size": 4, "max_tokens": 12},
        "optim": {"lr": 2e-3, "warmup_steps": 1},
        "run": {"checkpoint_every": 0, "loggers": ["jsonl"], "progress": False, "save_trajectories": False},
    }
    (root / "config.yaml").write_text(yaml.safe_dump(config))
    return root / "config.yaml"


def _run(config: Path, overrides: list[str]) -> dict[str, float]:
    from veriloop.training import RLTrainer, load_config

    history = RLTrainer(load_config(config, overrides)).train()
    trained = [m for m in history if "mismatch/abs_logprob_diff_mean" in m]
    row = {key.split("/")[1]: statistics.fmean(m[key] for m in trained) for key in REPORTED}
    last = history[-max(1, len(history) // 3) :]
    row["reward_last_third"] = statistics.fmean(m["reward/sampled_mean"] for m in last)
    row["step_s_median"] = statistics.median(m["time/step_s"] for m in history if "time/step_s" in m)
    return {key: round(value, 6) for key, value in row.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, help="a training config (default: the tiny model on digit tasks)")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated correction modes to run")
    parser.add_argument("overrides", nargs="*", help="SECTION.FIELD=VALUE for every run")
    args = parser.parse_args()
    result: dict[str, object] = {"steps": args.steps, "overrides": args.overrides}
    with tempfile.TemporaryDirectory() as scratch:
        config = args.config or _tiny_config(Path(scratch))
        for mode in args.modes.split(","):
            out = Path(scratch) / mode
            overrides = [*args.overrides, f"algorithm.correction.mode={mode}", f"run.out={out}"]
            result[mode] = _run(config, [*overrides, f"run.steps={args.steps}"])
    print(json.dumps(result))


if __name__ == "__main__":
    main()
