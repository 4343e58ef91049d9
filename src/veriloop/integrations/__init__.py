"""Layer 6: adapters that let other trainers use veriloop's verifiers unchanged.

Nothing here is imported by the command line, and no trainer library is imported here: the
adapters only follow the trainers' documented call signatures.

* TRL: ``trl_reward_function(tasks)`` for ``GRPOTrainer(reward_funcs=[...])``.
* verl: ``compute_score`` / ``make_compute_score(tasks)`` for ``custom_reward_function``.
"""

from veriloop.integrations._trl import TaskReward, completion_text, trl_dataset_rows, trl_reward_function
from veriloop.integrations._verl import compute_score, make_compute_score, verl_rows, write_verl_parquet

__all__ = [
    "TaskReward",
    "completion_text",
    "compute_score",
    "make_compute_score",
    "trl_dataset_rows",
    "trl_reward_function",
    "verl_rows",
    "write_verl_parquet",
]
