"""TRL's GRPOTrainer, rewarded by veriloop's verifiers: a task set in, a trained model out.

    .venv/bin/pip install 'trl>=0.20,<2'
    .venv/bin/veriloop model init-tiny --out runs/tiny
    .venv/bin/veriloop tasks generate arithmetic --seed 0 --size 64 --out runs/arith.jsonl
    .venv/bin/python examples/trl_grpo.py --model runs/tiny --tasks runs/arith.jsonl --steps 2

The dataset has a ``task_id`` column; the reward function finds each row's task (verifier and
gold included) by it, runs the verifier (code in the sandbox, math in killable processes), and
gives TRL one float per completion (None for a grader failure, which TRL leaves out).
"""

from __future__ import annotations

import argparse
import tempfile


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="local HF model directory")
    parser.add_argument("--tasks", required=True, help="veriloop task set (.jsonl or .parquet)")
    parser.add_argument("--steps", type=int, default=2)
    args = parser.parse_args()

    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from veriloop.integrations import trl_dataset_rows, trl_reward_function
    from veriloop.tasks import load_tasks

    tasks = load_tasks(args.tasks)
    reward = trl_reward_function(tasks)
    with tempfile.TemporaryDirectory() as out:
        config = GRPOConfig(
            output_dir=out,
            per_device_train_batch_size=8,
            num_generations=4,
            max_completion_length=16,
            max_steps=args.steps,
            use_cpu=True,
            bf16=False,
            report_to="none",
            save_strategy="no",
        )
        trainer = GRPOTrainer(
            model=args.model,
            reward_funcs=[reward],
            args=config,
            train_dataset=Dataset.from_list(trl_dataset_rows(tasks)),
        )
        trainer.train()
    rewards = [s.reward for s in reward.last_scores]
    print(f"trained {args.steps} steps; last batch rewards: {rewards}")


if __name__ == "__main__":
    main()
