"""Layer 5: trainers (SFT, GRPO-family RL), their configs and checkpoints."""

from veriloop.training._config import SFTConfig, TrainConfig, load_config
from veriloop.training._data import SamplerState, TaskSampler
from veriloop.training._quickstart import QuickstartConfig, run_quickstart
from veriloop.training._rl import RLTrainer, read_metrics, seed_everything
from veriloop.training._sft import SFTStep, read_conversations, run_sft, sft_loss, tokenize_conversation, train_sft
from veriloop.training._tiny_model import TinyModelSpec, init_tiny_model

__all__ = [
    "QuickstartConfig",
    "RLTrainer",
    "SFTConfig",
    "SFTStep",
    "SamplerState",
    "TaskSampler",
    "TinyModelSpec",
    "TrainConfig",
    "init_tiny_model",
    "load_config",
    "read_conversations",
    "read_metrics",
    "run_quickstart",
    "run_sft",
    "seed_everything",
    "sft_loss",
    "tokenize_conversation",
    "train_sft",
]
