"""Layer 5: trainers (SFT, GRPO-family RL), their configs and checkpoints, the async pipeline and rollout backends."""

from veriloop.training._backends import ROLLOUT_BACKENDS, LocalBackend, RolloutBackend, SharedBackend
from veriloop.training._config import SFTConfig, TrainConfig, load_config
from veriloop.training._data import SamplerState, TaskSampler
from veriloop.training._distributed import RankLost, ranks_from_environment
from veriloop.training._fetch_model import KNOWN_MODELS, FetchedModel, KnownModel, fetch_model, model_cache_dir
from veriloop.training._heartbeat import Heartbeats, Stall, read_events
from veriloop.training._import_gguf import ImportedModel, import_gguf
from veriloop.training._ledger import Draw, PromptLedger, ledger_summary, read_ledger
from veriloop.training._metrics import read_metrics
from veriloop.training._pipeline import AsyncSampler, SampledBatch
from veriloop.training._data import seed_everything
from veriloop.training._rl import RLTrainer
from veriloop.training._rollout_worker import RolloutWorker, WorkerSpec, episode_config
from veriloop.training._sft import (
    SFTCheckpoints,
    SFTStep,
    read_conversations,
    run_sft,
    sft_loss,
    tokenize_conversation,
    train_sft,
)
from veriloop.training._tiny_model import TinyModelSpec, init_tiny_model
from veriloop.training.recipes import (  # recipes drive the trainers above, so they come last
    QuickstartConfig,
    SeedLoopConfig,
    SmolLM2Config,
    domain_results,
    run_quickstart,
    run_seed_loop,
    run_smollm2,
    smollm2_results,
)

__all__ = [
    "KNOWN_MODELS",
    "ROLLOUT_BACKENDS",
    "AsyncSampler",
    "Draw",
    "FetchedModel",
    "Heartbeats",
    "ImportedModel",
    "KnownModel",
    "LocalBackend",
    "PromptLedger",
    "QuickstartConfig",
    "RLTrainer",
    "RolloutBackend",
    "RolloutWorker",
    "SFTConfig",
    "SFTCheckpoints",
    "SFTStep",
    "SampledBatch",
    "SamplerState",
    "SeedLoopConfig",
    "SmolLM2Config",
    "SharedBackend",
    "Stall",
    "TaskSampler",
    "TinyModelSpec",
    "TrainConfig",
    "WorkerSpec",
    "episode_config",
    "fetch_model",
    "import_gguf",
    "init_tiny_model",
    "ledger_summary",
    "load_config",
    "model_cache_dir",
    "read_conversations",
    "read_events",
    "read_ledger",
    "read_metrics",
    "run_quickstart",
    "run_seed_loop",
    "run_smollm2",
    "smollm2_results",
    "run_sft",
    "seed_everything",
    "sft_loss",
    "tokenize_conversation",
    "train_sft",
    "RankLost",
    "domain_results",
    "ranks_from_environment",
    "train_on_ray",
]


def __getattr__(name: str):
    """``train_on_ray`` (``_ray_ranks.py``) imports ray, so it loads on first use, not with this package."""
    if name == "train_on_ray":
        from veriloop.training._ray_ranks import train_on_ray

        return train_on_ray
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
