"""verl's own reward path over a veriloop task set, run with the Python of the verl environment.

``python verl_reward_path.py REQUEST.json`` reads ``{"tasks", "parquet", "tokenizer", "responses",
"sandbox_url", "code_tests"}`` and prints one JSON line with what verl computed:

- ``rows``: each row of the parquet as verl's ``RLHFDataset`` hands it out, scored by verl's
  ``NaiveRewardManager`` with the reward function loaded the way verl's trainer loads it
  (``custom_reward_function.path/name/reward_kwargs`` through ``get_custom_reward_fn``), the
  response tokens built from ``responses[task_id]``;
- ``sandbox_score``: verl's built-in code reward (``default_compute_score`` for a ``codecontests``
  row with ``sandbox_fusion_url``) against ``veriloop sandbox serve``, for each ``code_tests`` case.

Nothing of verl is replaced: the test that runs this compares what verl reports with the answers.
"""

from __future__ import annotations

import json
import sys
import tempfile

import numpy as np
import torch
from omegaconf import OmegaConf
from transformers import AutoTokenizer
from verl import DataProto
from verl.trainer.ppo.reward import get_custom_reward_fn
from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn
from verl.utils.reward_score import default_compute_score
from verl.workers.reward_manager import NaiveRewardManager

import veriloop.integrations._verl as adapter


def _batch(dataset: RLHFDataset, tokenizer, responses: dict[str, str]) -> DataProto:
    """A rollout batch as verl's trainer hands it to the reward manager: left-padded prompts,
    right-padded responses and one attention mask over both."""
    rows = [dataset[index] for index in range(len(dataset))]
    texts = [
        tokenizer.apply_chat_template(row["raw_prompt"], add_generation_prompt=True, tokenize=False) for row in rows
    ]
    prompts = [tokenizer.encode(text) for text in texts]
    answers = [tokenizer.encode(responses[row["extra_info"]["task_id"]]) for row in rows]
    prompt_width, answer_width = max(map(len, prompts)), max(map(len, answers))
    pad = tokenizer.pad_token_id
    prompt_ids = torch.tensor([[pad] * (prompt_width - len(ids)) + ids for ids in prompts])
    answer_ids = torch.tensor([ids + [pad] * (answer_width - len(ids)) for ids in answers])
    mask = torch.tensor(
        [
            [0] * (prompt_width - len(p)) + [1] * len(p) + [1] * len(a) + [0] * (answer_width - len(a))
            for p, a in zip(prompts, answers, strict=True)
        ]
    )
    collated = collate_fn(rows)
    non_tensors = {key: value for key, value in collated.items() if isinstance(value, np.ndarray)}
    return DataProto.from_dict(
        tensors={"prompts": prompt_ids, "responses": answer_ids, "attention_mask": mask},
        non_tensors=non_tensors,
    )


def main(request_path: str) -> None:
    request = json.loads(open(request_path).read())
    tokenizer = AutoTokenizer.from_pretrained(request["tokenizer"])
    with tempfile.TemporaryDirectory() as cache:
        dataset = RLHFDataset(
            request["parquet"],
            tokenizer,
            OmegaConf.create({"max_prompt_length": 4096, "filter_overlong_prompts": False, "cache_dir": cache}),
        )
        config = OmegaConf.create(
            {
                "reward": {
                    "custom_reward_function": {
                        "path": adapter.__file__,
                        "name": "compute_score",
                        "reward_kwargs": {"tasks": request["tasks"]},
                    }
                }
            }
        )
        manager = NaiveRewardManager(tokenizer, num_examine=0, compute_score=get_custom_reward_fn(config))
        batch = _batch(dataset, tokenizer, request["responses"])
        result = manager(batch, return_dict=True)
    rewards = result["reward_tensor"].sum(dim=-1).tolist()
    extra = result["reward_extra_info"]
    rows = [
        {
            "task_id": batch.non_tensor_batch["extra_info"][index]["task_id"],
            "data_source": batch.non_tensor_batch["data_source"][index],
            "reward": rewards[index],
            "passed": extra["passed"][index],
            "infra_error": extra["infra_error"][index],
        }
        for index in range(len(batch))
    ]
    sandbox_scores = []
    for case in request["code_tests"]:
        score = default_compute_score(
            "codecontests",
            case["completion"],
            json.dumps(case["tests"]),
            sandbox_fusion_url=request["sandbox_url"],
            memory_limit_mb=256,
        )
        sandbox_scores.append(score if isinstance(score, float | int) else score[0])
    print(json.dumps({"rows": rows, "sandbox_scores": sandbox_scores}))


if __name__ == "__main__":
    main(sys.argv[1])
