"""verl's reward manager, rewarding with veriloop's verifiers: a task set and answers in, verl's rewards out.

    make setup-verl   # .venv-verl: verl 0.9 and this project (verl caps transformers below 5.11)
    .venv/bin/veriloop model init-tiny --out runs/tiny
    .venv/bin/veriloop tasks generate arithmetic --seed 0 --size 8 --out runs/arith.jsonl
    .venv/bin/veriloop tasks export-verl runs/arith.jsonl --out runs/arith.parquet
    .venv-verl/bin/python examples/verl_reward.py --tasks runs/arith.jsonl --data runs/arith.parquet \\
        --tokenizer runs/tiny --answers answers.jsonl

verl's ``RLHFDataset`` reads the parquet; the reward function is found the way verl's trainer finds it
(``reward.custom_reward_function`` with ``path``, ``name`` and the task file as a reward kwarg); verl's
``NaiveRewardManager`` scores a rollout batch whose responses are the answers (JSON lines with
``task_id`` and ``response``; without them, each task's gold in a ``\\boxed{}``). One JSON line per row.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any


def reward_config(tasks: str) -> Any:
    """verl 0.9's reward section, pointing its custom reward function at veriloop's adapter."""
    from omegaconf import OmegaConf

    import veriloop.integrations._verl as adapter

    function = {"path": adapter.__file__, "name": "compute_score", "reward_kwargs": {"tasks": tasks}}
    return OmegaConf.create({"reward": {"custom_reward_function": function}})


def rollout_batch(rows: list[dict[str, Any]], tokenizer: Any, answers: dict[str, str]) -> Any:
    """A rollout batch as verl's trainer hands it to the reward manager: left-padded prompts,
    right-padded responses and one attention mask over both."""
    import numpy as np
    import torch
    from verl import DataProto
    from verl.utils.dataset.rl_dataset import collate_fn

    texts = [tokenizer.apply_chat_template(r["raw_prompt"], add_generation_prompt=True, tokenize=False) for r in rows]
    prompts = [tokenizer.encode(text) for text in texts]
    responses = [tokenizer.encode(answers[row["extra_info"]["task_id"]]) for row in rows]
    prompt_width, response_width = max(map(len, prompts)), max(map(len, responses))
    pad = tokenizer.pad_token_id
    mask = [
        [0] * (prompt_width - len(p)) + [1] * (len(p) + len(r)) + [0] * (response_width - len(r))
        for p, r in zip(prompts, responses, strict=True)
    ]
    collated = collate_fn(rows)
    return DataProto.from_dict(
        tensors={
            "prompts": torch.tensor([[pad] * (prompt_width - len(ids)) + ids for ids in prompts]),
            "responses": torch.tensor([ids + [pad] * (response_width - len(ids)) for ids in responses]),
            "attention_mask": torch.tensor(mask),
        },
        non_tensors={key: value for key, value in collated.items() if isinstance(value, np.ndarray)},
    )


def score_with_verl(tasks: str, data: list[str], tokenizer_dir: str, answers: dict[str, str] | None) -> list[dict]:
    """Each row of ``data`` scored by verl's ``NaiveRewardManager``: task id, reward, passed, infra_error."""
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl.trainer.ppo.reward import get_custom_reward_fn
    from verl.utils.dataset.rl_dataset import RLHFDataset
    from verl.workers.reward_manager import NaiveRewardManager

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    with tempfile.TemporaryDirectory() as cache:
        settings = {"max_prompt_length": 4096, "filter_overlong_prompts": False, "cache_dir": cache}
        dataset = RLHFDataset(data, tokenizer, OmegaConf.create(settings))
        rows = [dataset[index] for index in range(len(dataset))]
    if answers is None:
        answers = {row["extra_info"]["task_id"]: f"\\boxed{{{row['reward_model']['ground_truth']}}}" for row in rows}
    manager = NaiveRewardManager(tokenizer, num_examine=0, compute_score=get_custom_reward_fn(reward_config(tasks)))
    result = manager(rollout_batch(rows, tokenizer, answers), return_dict=True)
    rewards = result["reward_tensor"].sum(dim=-1).tolist()
    extra = result["reward_extra_info"]
    return [
        {
            "task_id": row["extra_info"]["task_id"],
            "reward": rewards[index],
            "passed": extra["passed"][index],
            "infra_error": extra["infra_error"][index],
        }
        for index, row in enumerate(rows)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", required=True, help="veriloop task set (.jsonl or .parquet)")
    parser.add_argument("--data", required=True, nargs="+", help="verl parquet files (veriloop tasks export-verl)")
    parser.add_argument("--tokenizer", required=True, help="local HF tokenizer (or model) directory")
    parser.add_argument("--answers", help="JSON lines with task_id and response (default: each task's gold)")
    args = parser.parse_args()
    answers = None
    if args.answers:
        lines = Path(args.answers).read_text().splitlines()
        answers = {row["task_id"]: row["response"] for row in map(json.loads, filter(str.strip, lines))}
    for row in score_with_verl(args.tasks, args.data, args.tokenizer, answers):
        print(json.dumps(row))


if __name__ == "__main__":
    main()
