"""One optimizer step of a trainer, as one rank of a data-parallel run or alone, run as a script by
``test_data_parallel.py``: ``python data_parallel_rank.py rl|sft CONFIG RESULT``.

The rank comes from the environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT, as
torchrun sets it); without it the process trains alone. Rank 0 (or the lone process) saves
``{"before", "after", "grad"}``: the trainable weights before and after the step, and the
gradient the optimizer stepped on (reduced over the ranks, clipped; under fsdp gathered whole
for RL and absent for SFT), by parameter name. Every rank also writes ``RESULT.rankN.json``: how
many AdamW moment elements it holds itself (``local``) and in the whole model (``whole``; RL).
"""

from __future__ import annotations

import json
import sys

import torch
from torch.distributed.tensor import DTensor


def _snapshot(model) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in model.named_parameters() if p.requires_grad}


def _whole(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.full_tensor() if isinstance(tensor, DTensor) else tensor


def _gradients(model, optimizer) -> dict[str, torch.Tensor]:
    """The stepped-on gradient by name (the optimizer's parameters are in ``named_parameters`` order;
    under fsdp they are the shards, gathered here on every rank)."""
    names = [name for name, p in model.named_parameters() if p.requires_grad]
    parameters = [p for group in optimizer.param_groups for p in group["params"]]
    return {name: _whole(p.grad).detach().clone() for name, p in zip(names, parameters, strict=True)}


def _state_sizes(optimizer) -> dict[str, int]:
    moments = [v for state in optimizer.state.values() for k, v in state.items() if k in ("exp_avg", "exp_avg_sq")]
    local = sum((v.to_local() if isinstance(v, DTensor) else v).numel() for v in moments)
    return {"local": local, "whole": sum(v.numel() for v in moments)}


def rl_step(config_path: str) -> tuple[dict, dict, dict, dict, object]:
    from veriloop.training import RLTrainer, load_config

    trainer = RLTrainer(load_config(config_path))
    before = _snapshot(trainer.model)
    trainer.step()
    after, grads = _snapshot(trainer.model), _gradients(trainer.model, trainer.optimizer)
    sizes = _state_sizes(trainer.optimizer)
    trainer.close()
    return before, after, grads, sizes, trainer.ranks


def sft_step(config_path: str) -> tuple[dict, dict, dict, dict, object]:
    from veriloop.training import SFTConfig, load_config, read_conversations, train_sft
    from veriloop.training._distributed import process_group_for
    from veriloop.training._model import load_policy

    config = load_config(config_path, model=SFTConfig)
    ranks = process_group_for(config.distributed, "cpu")
    model, tokenizer = load_policy(config.model)
    before = _snapshot(model)
    conversations = read_conversations(config.data.train)
    train_sft(
        model,
        tokenizer,
        conversations,
        steps=1,
        batch_size=config.optim.batch_size,
        lr=config.optim.lr,
        ranks=ranks,
        strategy=config.distributed.strategy,
    )
    # Under fsdp the gradient lives in the optimizer's shards, which train_sft keeps to itself: none here.
    grads = {name: p.grad.detach().clone() for name, p in model.named_parameters() if p.grad is not None}
    after = _snapshot(model)
    ranks.close()
    return before, after, grads, {}, ranks


if __name__ == "__main__":
    kind, config_path, result = sys.argv[1:4]
    before, after, grads, sizes, ranks = (rl_step if kind == "rl" else sft_step)(config_path)
    with open(f"{result}.rank{ranks.rank}.json", "w") as out:
        json.dump(sizes, out)
    if ranks.is_main:
        torch.save({"before": before, "after": after, "grad": grads}, result)
