"""One optimizer step of a trainer, as one rank of a data-parallel run or alone, run as a script by
``test_data_parallel.py``: ``python data_parallel_rank.py rl|sft CONFIG RESULT``.

The rank comes from the environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT, as
torchrun sets it); without it the process trains alone. Rank 0 (or the lone process) saves
``{"before", "after", "grad"}``: the trainable weights before and after the step, and the
gradient the optimizer stepped on (reduced over the ranks, clipped), by parameter name.
"""

from __future__ import annotations

import sys

import torch


def _snapshot(model) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in model.named_parameters() if p.requires_grad}


def rl_step(config_path: str) -> tuple[dict, dict, object, bool]:
    from veriloop.training import RLTrainer, load_config

    trainer = RLTrainer(load_config(config_path))
    before = _snapshot(trainer.model)
    trainer.step()
    main = trainer.ranks.is_main
    trainer.close()
    return before, _snapshot(trainer.model), trainer.model, main


def sft_step(config_path: str) -> tuple[dict, dict, object, bool]:
    from veriloop.training import SFTConfig, load_config, read_conversations, train_sft
    from veriloop.training._distributed import process_group_for
    from veriloop.training._model import load_policy

    config = load_config(config_path, model=SFTConfig)
    ranks = process_group_for(config.distributed, "cpu")
    model, tokenizer = load_policy(config.model)
    before = _snapshot(model)
    conversations = read_conversations(config.data.train)
    train_sft(
        model, tokenizer, conversations, steps=1, batch_size=config.optim.batch_size, lr=config.optim.lr, ranks=ranks
    )
    ranks.close()
    return before, _snapshot(model), model, ranks.is_main


if __name__ == "__main__":
    kind, config_path, result = sys.argv[1:4]
    before, after, model, main = (rl_step if kind == "rl" else sft_step)(config_path)
    if main:
        grads = {name: p.grad.detach().clone() for name, p in model.named_parameters() if p.requires_grad}
        torch.save({"before": before, "after": after, "grad": grads}, result)
