"""Layer 3: generation engines, multi-turn episodes, early stopping, the trajectory store, and the
OpenAI-compatible gateway that records an agent program's calls token for token."""

from veriloop.rollout import _hf, _openai, _replay, _vllm  # noqa: F401  (register the engines; vLLM loads lazily)
from veriloop.rollout import _judge_engine  # noqa: F401  (registers the judge backend for a local judge model)
from veriloop.rollout._actions import Action, parse_action, tool_instructions
from veriloop.rollout._agent import AgentProgram, AgentRun, run_agent
from veriloop.rollout._agent_rollout import agent_rollout
from veriloop.rollout._engine import ENGINES, Engine, Prompt, create_engine
from veriloop.rollout._episode import (
    EPISODE_DRIVERS,
    EpisodeConfig,
    Observation,
    ToolExecutor,
    check_domain_budgets,
    check_turn_fits,
    observation_ids,
    prompt_tokens,
    run_episode,
)
from veriloop.rollout._gateway import Gateway, check_gateway_access
from veriloop.rollout._gateway_calls import GatewayLimits
from veriloop.rollout._gateway_chat import parse_tool_calls, tools_block
from veriloop.rollout._gateway_records import GatewayCall, GatewayEpisode, episode_trajectory
from veriloop.rollout._openenv_episode import run_openenv_episode
from veriloop.rollout._verifiers_episode import run_verifiers_episode
from veriloop.rollout._hf import HFEngine, load_model_and_tokenizer, quiet_transformers
from veriloop.rollout._lean import LeanDecoder
from veriloop.rollout._openai import OpenAIEngine, parse_endpoint
from veriloop.rollout._replay import ReplayEngine
from veriloop.rollout._rollout import (
    RolloutBatch,
    RolloutMetrics,
    arollout,
    context_summary,
    rollout,
    summarize_rollout,
)
from veriloop.rollout._sampling import FinishReason, Sample, SamplingParams, truncated_logprobs, truncation_mask
from veriloop.rollout._stopping import FailureTracker, StopConfig, StopPredicate, repeating_block
from veriloop.rollout._tools import SandboxTools, format_observation
from veriloop.rollout._vllm import VLLMEngine, require_vllm
from veriloop.rollout._store import (
    SceneStore,
    TrajectoryStore,
    conversation,
    keep_scenes,
    preference_pairs,
    sft_rows,
)

summarize = summarize_rollout  # the earlier name, kept for one release

__all__ = [
    "ENGINES",
    "EPISODE_DRIVERS",
    "Action",
    "AgentProgram",
    "AgentRun",
    "Engine",
    "EpisodeConfig",
    "run_openenv_episode",
    "run_verifiers_episode",
    "FailureTracker",
    "FinishReason",
    "Gateway",
    "GatewayCall",
    "GatewayEpisode",
    "GatewayLimits",
    "HFEngine",
    "LeanDecoder",
    "Observation",
    "OpenAIEngine",
    "ReplayEngine",
    "Prompt",
    "RolloutBatch",
    "RolloutMetrics",
    "Sample",
    "SamplingParams",
    "SandboxTools",
    "StopConfig",
    "StopPredicate",
    "ToolExecutor",
    "VLLMEngine",
    "SceneStore",
    "TrajectoryStore",
    "agent_rollout",
    "arollout",
    "check_domain_budgets",
    "check_gateway_access",
    "check_turn_fits",
    "context_summary",
    "conversation",
    "create_engine",
    "episode_trajectory",
    "format_observation",
    "load_model_and_tokenizer",
    "quiet_transformers",
    "observation_ids",
    "parse_action",
    "run_agent",
    "parse_endpoint",
    "parse_tool_calls",
    "keep_scenes",
    "preference_pairs",
    "repeating_block",
    "require_vllm",
    "rollout",
    "prompt_tokens",
    "run_episode",
    "sft_rows",
    "summarize",
    "summarize_rollout",
    "tool_instructions",
    "tools_block",
    "truncated_logprobs",
    "truncation_mask",
]
