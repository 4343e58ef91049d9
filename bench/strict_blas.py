"""What strict MKL (batch-invariant products) costs: bench/generate.py and bench/trl_compare.py,
each run with MKL's default kernels (VERILOOP_STRICT_BLAS=0) and in strict mode, alternately.

Every run is its own process (MKL fixes its mode at its first call); the two modes alternate
``--rounds`` times so that background load hits both alike, and the figure per mode is the
median over rounds. The last line printed is a JSON object with, per mode, the hf engine's
tokens/s for each model size and veriloop's GRPO seconds per step, and the strict/default ratios.

    .venv/bin/python bench/strict_blas.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).parent
MODES = {"default": "0", "strict": "1"}


def _json_lines(script: str, strict: str) -> list[dict]:
    env = {k: v for k, v in os.environ.items() if k != "MKL_CBWR"}
    env["VERILOOP_STRICT_BLAS"] = strict
    done = subprocess.run([sys.executable, str(BENCH / script)], capture_output=True, text=True, env=env, check=True)
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def _one_round(mode: str) -> dict[str, float]:
    figures = {
        f"generate_{row['model']}_tokens_per_s": row["veriloop_tokens_per_s"]
        for row in _json_lines("generate.py", MODES[mode])
    }
    figures["grpo_s_per_step"] = _json_lines("trl_compare.py", MODES[mode])[-1]["veriloop_s_per_step"]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    rounds: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
    for index in range(args.rounds):
        for mode in MODES if index % 2 == 0 else reversed(list(MODES)):
            rounds[mode].append(_one_round(mode))
            print(json.dumps({"round": index, "mode": mode, **rounds[mode][-1]}), flush=True)
    medians = {mode: {key: statistics.median(r[key] for r in runs) for key in runs[0]} for mode, runs in rounds.items()}
    ratios = {key: round(medians["strict"][key] / medians["default"][key], 3) for key in medians["default"]}
    print(json.dumps({"bench": "strict_blas", "rounds": args.rounds, **medians, "strict_over_default": ratios}))


if __name__ == "__main__":
    main()
