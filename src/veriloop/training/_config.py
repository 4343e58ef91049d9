"""The RL training config: flat sections, every field with a default, YAML plus CLI overrides."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from veriloop.core import UserError, describe_validation_error, load_plugins, resolve_plugin
from veriloop.rollout import AgentProgram
from veriloop.scheduling import ScheduleConfig


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelSection(Section):
    path: str = Field(default="", description="local HF model directory to start from")
    device: str = Field(default="cpu", description="cpu, cuda or cuda:N")
    dtype: str = Field(default="auto", description="auto (bf16 on GPUs that have it, else fp32), float32, bfloat16")
    lora_rank: int = Field(default=0, ge=0, description="LoRA rank; 0 trains all weights")
    lora_alpha: int = Field(default=16, ge=1, description="LoRA scaling numerator")
    lora_dropout: float = Field(default=0.0, ge=0, lt=1, description="LoRA dropout")


class DataSection(Section):
    train: str = Field(default="", description="training task set (.jsonl or .parquet)")
    heldout: str = Field(default="", description="held-out task set for periodic evaluation (optional)")


class RolloutSection(Section):
    prompts_per_step: int = Field(default=16, ge=1, description="groups (prompts) trained on per step")
    group_size: int = Field(default=8, ge=1, description="samples per prompt")
    temperature: float = Field(default=1.0, gt=0, description="sampling temperature (also used to recompute log-probs)")
    top_p: float = Field(
        default=1.0,
        gt=0,
        le=1,
        description="nucleus sampling mass; below 1 the log-probs trained on are those of the truncated, "
        "renormalised distribution, and the trainer scores tokens under the same cut",
    )
    top_k: int = Field(
        default=0, ge=0, description="sample among the k likeliest tokens only (0: all), scored as top_p is"
    )
    max_tokens: int = Field(
        default=64, ge=1, description="new tokens per model turn (tasks of a domain max_tokens_by_domain leaves out)"
    )
    max_tokens_by_domain: dict[str, int] = Field(
        default_factory=dict,
        description="new tokens per model turn for the tasks of these domains (their task's domain field), "
        "e.g. {cad: 400}; overlong shaping measures each sample against its own",
    )
    max_turns: int = Field(default=1, ge=1, description="model turns per episode")
    agent: AgentProgram | None = Field(
        default=None,
        description="an agent program (command or module:function) that plays each episode unchanged against an "
        "OpenAI-compatible gateway over the policy; its calls' sampled tokens are trained on, its printed answer "
        "is scored by the task's verifier; max_tokens caps each call",
    )
    tools: tuple[str, ...] = Field(default=(), description="tools for multi-turn episodes: python, shell, submit")
    tool_instructions: bool = Field(
        default=True,
        description="with tools, open each prompt with a system message describing them "
        "(off: the model knows the tags from training, and prompts stay short)",
    )
    feedback_on_fail: bool = Field(
        default=False,
        description="after a failing answer, show the verifier's feedback and let the model retry (up to max_turns)",
    )
    context_budget: int | None = Field(
        default=None, ge=16, description="most tokens in the model's context during a turn; None: unbounded"
    )
    context_policy: Literal["truncate", "drop_oldest", "stop"] = Field(
        default="stop", description="when the next observation would break context_budget: truncate, drop_oldest, stop"
    )
    reuse_kv: bool = Field(default=True, description="continue each turn from the keys and values of the earlier ones")
    concurrency: int = Field(default=256, ge=1, description="episodes in flight at once")
    max_batch_size: int = Field(default=256, ge=1, description="rows per generation batch")
    engine: Literal["hf", "vllm"] = Field(
        default="hf",
        description="what samples rollouts: hf (the trainer's own model) or vllm (an in-process vLLM beside "
        "the trainer, sent the new weights after every update; needs `make setup-vllm`)",
    )
    dtype: Literal["model", "float32", "bfloat16"] = Field(
        default="model",
        description="hf engine: precision samples are computed in: model (the policy's own), or a snapshot of the "
        "weights taken after each update (bfloat16 decodes several times faster on CPUs with bfloat16 units; "
        "the log-probs are the bfloat16 forward's)",
    )
    vllm_kv_cache_mb: int = Field(default=256, ge=16, description="vllm: memory for its KV cache, in MiB")
    vllm_max_model_len: int = Field(
        default=0,
        ge=0,
        description="vllm: longest prompt plus completion it serves (0: the model's positions, <= 4096)",
    )
    vllm_max_num_seqs: int = Field(default=256, ge=1, description="vllm: sequences it decodes together")

    @field_validator("max_tokens_by_domain", mode="before")
    @classmethod
    def _whole_budgets(cls, budgets: Any) -> dict[str, int]:
        from veriloop.rollout import check_domain_budgets

        return check_domain_budgets(budgets)

    @model_validator(mode="after")
    def _context_leaves_a_turn(self) -> RolloutSection:
        from veriloop.rollout import check_turn_fits

        check_turn_fits(self.context_budget, self.largest_max_tokens, "max_tokens")
        return self

    @model_validator(mode="after")
    def _dtype_is_the_hf_engines(self) -> RolloutSection:
        if self.dtype != "model" and self.engine != "hf":
            raise ValueError(f"dtype={self.dtype} applies to the hf engine; {self.engine} samples in its own precision")
        return self

    @property
    def largest_max_tokens(self) -> int:
        """The most new tokens any task's turn may have."""
        return max([self.max_tokens, *self.max_tokens_by_domain.values()])


class CorrectionSection(Section):
    """How the trainer corrects the gap between the policy that sampled a batch and its own.

    A group of fields inside ``algorithm`` (``algorithm.correction.mode``), the one place a section
    nests: the bounds mean nothing without the mode that reads them, and they are set together.
    """

    mode: str = Field(
        default="none",
        description="none, token_tis (weight min(rho, cap) per token), token_mask (drop tokens whose rho leaves "
        "[low, high]), sequence_tis or sequence_mask (the same on each sequence's geometric-mean rho); "
        "rho = pi_trainer / pi_engine per token; any mode but none trains against the recomputed log-probs",
    )
    cap: float = Field(default=2.0, gt=1, description="token_tis, sequence_tis: the largest weight")
    low: float = Field(default=0.5, gt=0, lt=1, description="token_mask, sequence_mask: the smallest ratio kept")
    high: float = Field(default=2.0, gt=1, description="token_mask, sequence_mask: the largest ratio kept")
    measure: bool = Field(
        default=True,
        description="log the mismatch/ metrics every step: read off the update's first pass when no mode is "
        "set, else (or with dropout) from the recomputed log-probs",
    )

    @model_validator(mode="before")
    @classmethod
    def _mode_alone(cls, data: Any) -> Any:
        return {"mode": data} if isinstance(data, str) else data  # algorithm.correction=token_tis

    @field_validator("mode")
    @classmethod
    def _registered(cls, name: str) -> str:
        from veriloop.algorithms import CORRECTIONS

        if name not in CORRECTIONS:
            raise ValueError(f"unknown {CORRECTIONS.what} {name!r}; known: {', '.join(CORRECTIONS.names())}")
        return name


class AlgorithmSection(Section):
    advantage: str = Field(default="grpo", description="grpo, dr_grpo, rloo or reinforce_pp")
    clip_low: float = Field(default=0.2, ge=0, lt=1, description="lower ratio clip (1 - clip_low)")
    clip_high: float = Field(default=0.28, ge=0, description="upper ratio clip (1 + clip_high)")
    aggregation: str = Field(default="token-mean", description="token-mean, seq-mean-token-mean or seq-mean-token-sum")
    dual_clip: float | None = Field(
        default=None, gt=1, description="cap for negative-advantage tokens (off when unset)"
    )
    beta: float = Field(default=0.0, ge=0, description="KL coefficient; 0 needs no reference model")
    kl_estimator: Literal["k1", "k2", "k3"] = Field(default="k3", description="KL estimator")
    kl_mode: Literal["loss", "reward"] = Field(default="loss", description="KL as a loss term or a reward penalty")
    entropy_coef: float = Field(default=0.0, ge=0, description="entropy bonus coefficient")
    recompute_logprobs: bool = Field(
        default=False, description="recompute old log-probs instead of reusing the sampler's"
    )
    correction: CorrectionSection = Field(
        default_factory=CorrectionSection,
        description="engine-vs-trainer mismatch and staleness correction (algorithm.correction.mode, .cap, ...)",
    )
    dynamic_sampling: bool = Field(default=True, description="drop groups whose rewards are all equal, and refill")
    max_refills: int = Field(default=2, ge=0, description="extra sampling rounds to refill dropped groups")
    overlong: Literal["none", "penalty", "mask"] = Field(
        default="none", description="shaping of answers cut at max_tokens"
    )
    overlong_buffer: int = Field(default=16, ge=1, description="tokens before max_tokens where the soft penalty starts")
    overlong_penalty: float = Field(default=1.0, ge=0, description="penalty at (and past) max_tokens")

    @field_validator("advantage", "aggregation")
    @classmethod
    def _registered(cls, name: str, info: ValidationInfo) -> str:
        from veriloop.algorithms import ADVANTAGE_ESTIMATORS, AGGREGATIONS

        registry = ADVANTAGE_ESTIMATORS if info.field_name == "advantage" else AGGREGATIONS
        if name not in registry:
            raise ValueError(f"unknown {registry.what} {name!r}; known: {', '.join(registry.names())}")
        return name


class OptimSection(Section):
    lr: float = Field(default=1e-4, gt=0, description="AdamW learning rate")
    warmup_steps: int = Field(default=10, ge=0, description="linear warm-up steps")
    weight_decay: float = Field(default=0.0, ge=0, description="AdamW weight decay")
    max_grad_norm: float = Field(default=1.0, gt=0, description="gradient clipping norm")
    micro_batch_size: int = Field(default=64, ge=1, description="sequences per forward/backward pass")
    max_tokens_per_micro_batch: int = Field(
        default=0,
        ge=0,
        description="sequence packing: consecutive sequences fill each forward/backward pass up to this many "
        "tokens (prompt + completion; at most micro_batch_size sequences; a longer sequence gets a pass of its "
        "own) and run without padding, attention kept within each sequence; the same loss and gradients to "
        "float rounding; 0: off, micro_batch_size sequences padded to the longest",
    )
    updates_per_batch: int = Field(default=1, ge=1, description="optimizer passes over each batch (PPO epochs)")
    logprob_chunk_tokens: int = Field(
        default=1024,
        ge=0,
        description="completion positions whose vocabulary logits exist at once in the log-prob and entropy passes "
        "(memory on long sequences; the same values); 0: the whole completion at once",
    )
    autocast: Literal["none", "bfloat16"] = Field(
        default="none",
        description="bfloat16: the training passes' matrix products in bfloat16 (mixed precision; weights, "
        "gradients and AdamW stay in the model's precision): several times faster on CPUs with bfloat16 units",
    )
    activation_checkpointing: bool = Field(
        default=False,
        description="recompute each decoder layer in the backward pass instead of keeping its activations "
        "(less memory on long sequences, about one more forward pass of compute; the same gradients)",
    )


class RunSection(Section):
    steps: int = Field(default=100, ge=1, description="RL steps")
    seed: int = Field(default=0, description="seed for data order, sampling and initialisation")
    out: str = Field(default="runs/train", description="output directory")
    eval_every: int = Field(default=0, ge=0, description="evaluate on data.heldout every N steps (0: off)")
    eval_samples: int = Field(default=4, ge=1, description="samples per held-out task in periodic evaluation")
    checkpoint_every: int = Field(
        default=10, ge=0, description="save a resumable checkpoint every N steps (0: at the end only)"
    )
    keep_checkpoints: int = Field(default=2, ge=1, description="checkpoints kept on disk")
    save_trajectories: bool = Field(default=True, description="store every trajectory under OUT/trajectories")
    loggers: tuple[str, ...] = Field(default=("jsonl", "tensorboard"), description="jsonl, tensorboard, wandb, mlflow")
    progress: bool = Field(default=True, description="show a progress bar")
    resume_changes: tuple[str, ...] = Field(
        default=(), description="on resume, SECTION.FIELD names allowed to differ from the run's saved config"
    )


class PipelineSection(Section):
    mode: Literal["sync", "async"] = Field(
        default="sync", description="sync: generate, then train; async: generation runs ahead while the trainer trains"
    )
    max_staleness: int = Field(
        default=1,
        ge=0,
        description="async: policy versions a trajectory may lag the trainer (0 reproduces sync exactly)",
    )
    stale_correction: Literal["behaviour", "decoupled"] = Field(
        default="behaviour",
        description="async, with algorithm.correction.mode=none: stale tokens' ratio is taken against the policy "
        "that sampled them (PPO clip, ratio capped at is_cap for negative advantages); decoupled is the older "
        "spelling of algorithm.correction.mode=token_tis with cap is_cap",
    )
    is_cap: float = Field(
        default=2.0,
        gt=1,
        description="async: cap of the importance ratio of stale tokens (behaviour), or the correction's cap "
        "that stale_correction=decoupled sets",
    )
    partial_rollouts: bool = Field(
        default=False,
        description="async: weights the trainer publishes while a batch is generating are loaded between decode "
        "steps, and unfinished episodes go on with them (each token tagged with the version that sampled it; "
        "contexts prefilled again under the new weights); hf engine, local backend, max_staleness >= 1",
    )
    backend: Literal["local", "ray"] = Field(
        default="local", description="where rollout workers run: in this process, or as Ray actors"
    )
    ray_address: str = Field(
        default="",
        description="ray: cluster to join (e.g. 10.0.0.5:6379); empty: $RAY_ADDRESS if set, "
        "else a private single-node Ray on loopback",
    )
    workers: int = Field(
        default=1, ge=1, description="ray: rollout worker actors (each with its own model copy and sandboxes)"
    )
    worker_cpus: float = Field(default=1.0, gt=0, description="ray: CPUs reserved by each rollout worker")
    worker_gpus: float = Field(
        default=0.0,
        ge=0,
        description="ray: GPUs reserved by each rollout worker (1 for a vllm engine on a GPU node; 0: CPU workers)",
    )
    worker_retries: int = Field(default=2, ge=0, description="ray: times a failed shard is retried on a fresh worker")
    sandbox_workers: int = Field(default=2, ge=1, description="sandbox processes per rollout worker (code tools)")
    torch_threads: int = Field(
        default=0, ge=0, description="torch intra-op threads for this process (0: torch's default)"
    )
    stall_after_s: float = Field(default=300.0, gt=0, description="report a phase that made no progress for this long")


class DistributedSection(Section):
    strategy: Literal["auto", "ddp", "fsdp"] = Field(
        default="auto",
        description="data-parallel strategy over several ranks: ddp (every rank holds the whole model and "
        "optimizer; gradients summed across ranks once per optimizer step); fsdp (FSDP2: parameters, gradients "
        "and AdamW state sharded over the ranks, full weights gathered once per step for sampling; Llama, Qwen2 "
        "and Mistral shapes, no LoRA); auto: fsdp on CUDA for models fsdp shards, ddp otherwise",
    )
    ray_ranks: int = Field(
        default=0,
        ge=0,
        description="start this many training ranks as Ray actors on pipeline.ray_address (0: one process, "
        "or the ranks torchrun started)",
    )
    rank_cpus: float = Field(default=1.0, gt=0, description="ray: CPUs reserved by each training rank")
    rank_gpus: float = Field(default=0.0, ge=0, description="ray: GPUs reserved by each training rank")
    timeout_s: float = Field(
        default=600.0, gt=0, description="longest wait in one collective before a rank counts as hung"
    )
    lost_after_s: float = Field(
        default=10.0, ge=2, description="a rank silent this long (its process or machine died) ends the run"
    )


GROUP_RELATIVE = frozenset({"grpo", "dr_grpo", "rloo"})  # advantages from a group's own samples


class TrainConfig(Section):
    plugins: list[str] = Field(
        default_factory=list,
        description="modules or .py files (relative to the config) that "
        "register verifier kinds, estimators, ...; imported in every process that samples or verifies",
    )
    model: ModelSection = Field(default_factory=ModelSection)
    data: DataSection = Field(default_factory=DataSection)
    rollout: RolloutSection = Field(default_factory=RolloutSection)
    algorithm: AlgorithmSection = Field(default_factory=AlgorithmSection)
    optim: OptimSection = Field(default_factory=OptimSection)
    run: RunSection = Field(default_factory=RunSection)
    schedule: ScheduleConfig = Field(default_factory=ScheduleConfig)  # multi-domain runs (veriloop.scheduling)
    pipeline: PipelineSection = Field(default_factory=PipelineSection)
    distributed: DistributedSection = Field(default_factory=DistributedSection)

    @model_validator(mode="before")
    @classmethod
    def _decoupled_is_token_tis(cls, data: Any) -> Any:
        """Configs from before ``algorithm.correction``: ``pipeline.stale_correction=decoupled`` asked for
        truncated IS weights capped at ``pipeline.is_cap``; it now means ``algorithm.correction.mode=token_tis``."""
        if not isinstance(data, dict) or not isinstance(data.get("pipeline"), dict):
            return data
        pipeline = data["pipeline"]
        if pipeline.get("stale_correction") != "decoupled":
            return data
        if isinstance(data.get("algorithm"), BaseModel):
            return data
        algorithm = dict(data.get("algorithm") or {})
        correction = algorithm.get("correction")
        correction = {"mode": correction} if isinstance(correction, str) else correction
        if correction is None:
            algorithm["correction"] = {"mode": "token_tis", "cap": pipeline.get("is_cap", 2.0)}
        elif isinstance(correction, dict) and correction.get("mode", "none") == "none":
            raise ValueError(
                "pipeline.stale_correction=decoupled corrects stale tokens, and algorithm.correction.mode=none "
                "turns corrections off; set algorithm.correction.mode (token_tis is what decoupled meant) "
                "and drop pipeline.stale_correction"
            )
        return {**data, "algorithm": algorithm}

    @field_validator("plugins")
    @classmethod
    def _resolved(cls, plugins: list[str]) -> list[str]:
        return [resolve_plugin(p) for p in plugins]  # absolute paths: workers elsewhere load the same files

    @model_validator(mode="after")
    def _consistent(self) -> TrainConfig:
        if self.algorithm.advantage in GROUP_RELATIVE and self.rollout.group_size < 2:
            raise ValueError(
                f"algorithm.advantage={self.algorithm.advantage} compares the samples of a group, so it needs "
                "rollout.group_size >= 2 (one sample alone always gets advantage 0)"
            )
        if self.schedule.mixture and self.data.train:
            raise ValueError("set data.train or schedule.mixture, not both")
        if self.schedule.normalization != "none" and self.algorithm.advantage == "grpo":
            raise ValueError(
                "schedule.normalization has no effect with algorithm.advantage=grpo, which rescales each "
                "group by its own std; use dr_grpo, rloo or reinforce_pp, or normalization: none"
            )
        if self.pipeline.mode == "async" and self.schedule.active:
            raise ValueError(
                "pipeline.mode=async does not support a schedule section yet; use pipeline.mode=sync "
                "for multi-domain scheduled runs"
            )
        _check_engine(self)
        _check_partial_rollouts(self)
        _check_agent(self)
        return self


def _check_agent(config: TrainConfig) -> None:
    """An agent program brings its own loop and tools: the native loop's settings do not apply."""
    rollout = config.rollout
    if rollout.agent is None:
        return
    refused = {
        "rollout.tools": bool(rollout.tools),
        "rollout.max_turns > 1": rollout.max_turns > 1,
        "rollout.context_budget": rollout.context_budget is not None,
        "pipeline.partial_rollouts": config.pipeline.partial_rollouts,
        "a schedule section": config.schedule.active,
    }
    chosen = [name for name, on in refused.items() if on]
    if chosen:
        raise ValueError(
            "rollout.agent runs the agent program's own loop and tools through the gateway; it does not combine "
            f"with {', '.join(chosen)}"
        )
    if rollout.agent.mcp:
        from veriloop.mcp import mcp_servers

        try:
            mcp_servers(list(rollout.agent.mcp), "rollout.agent.mcp")
        except UserError as exc:
            raise ValueError(str(exc)) from None


def _check_partial_rollouts(config: TrainConfig) -> None:
    """Partial rollouts load weights into a running hf batch of a rollout worker in this process."""
    pipeline = config.pipeline
    if not pipeline.partial_rollouts:
        return
    needs = {
        "pipeline.mode=async": pipeline.mode == "async",
        "pipeline.max_staleness >= 1": pipeline.max_staleness >= 1,
        "pipeline.backend=local": pipeline.backend == "local",
        "rollout.engine=hf": config.rollout.engine == "hf",
        "distributed.ray_ranks=0": config.distributed.ray_ranks == 0,
    }
    missing = [name for name, met in needs.items() if not met]
    if missing:
        raise ValueError(
            "pipeline.partial_rollouts loads new weights into a running batch of the hf engine on the local "
            f"rollout worker while the trainer runs ahead; it needs {', '.join(missing)}"
        )


def _check_engine(config: TrainConfig) -> None:
    """Refuse the combinations the vllm rollout engine does not support (yet)."""
    if config.rollout.engine != "vllm":
        return
    unsupported = {"distributed.ray_ranks > 0": config.distributed.ray_ranks > 0}
    refused = [name for name, chosen in unsupported.items() if chosen]
    if refused:
        raise ValueError(
            f"rollout.engine=vllm samples for one trainer process (in its process, or on Ray actors with "
            f"pipeline.backend=ray) and does not support {', '.join(refused)}; "
            "use rollout.engine=hf for those, or distributed.ray_ranks=0"
        )


def _set_dotted(data: dict[str, Any], key: str, value: Any) -> None:
    """``SECTION.FIELD`` (or ``SECTION.GROUP.FIELD`` for a group of fields such as ``algorithm.correction``)."""
    *path, field = key.split(".")
    if not path or len(path) > 2 or not all(path) or not field:
        raise UserError(f"override {key!r}: use SECTION.FIELD=VALUE, e.g. rollout.temperature=0.7")
    for depth, name in enumerate(path):
        data.setdefault(name, {})
        if not isinstance(data[name], dict):
            raise UserError(f"override {key!r}: {'.'.join(path[: depth + 1])!r} is not a section")
        data = data[name]
    data[field] = value


def _load_config_plugins(data: dict[str, Any], base: Path | None) -> None:
    """Import the config's plugins before validating it (they may add the names it uses); keep them resolved."""
    plugins = data.get("plugins")
    if plugins is None:
        return
    if not isinstance(plugins, list) or not all(isinstance(p, str) for p in plugins):
        raise UserError("plugins: expected a list of module names or .py paths, e.g. plugins: [my_kinds.py]")
    data["plugins"] = [resolve_plugin(p, base) for p in plugins]
    load_plugins(data["plugins"])


def load_config(
    path: str | Path | None, overrides: list[str] | tuple[str, ...] = (), model: type[Section] = TrainConfig
) -> Any:
    """Read a YAML config and apply ``section.field=value`` overrides (values parsed as YAML)."""
    import yaml

    data: dict[str, Any] = {}
    if path is not None:
        source = Path(path)
        if not source.is_file():
            raise UserError(f"{source}: no such config file")
        try:
            data = yaml.safe_load(source.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f": line {mark.line + 1}" if mark is not None else ""
            raise UserError(f"{source}{where}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
        if not isinstance(data, dict):
            raise UserError(f"{source}: expected a mapping of sections at the top level")
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep:
            raise UserError(f"override {item!r}: expected SECTION.FIELD=VALUE")
        _set_dotted(data, key.strip(), yaml.safe_load(raw) if raw.strip() else "")
    _load_config_plugins(data, Path(path).parent if path is not None else None)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise UserError(f"{path or 'config'}: {describe_validation_error(exc)}") from None


class SFTDataSection(Section):
    train: str = Field(default="", description='chat-format JSONL: one {"messages": [...]} per line')


class SFTOptimSection(Section):
    lr: float = Field(default=1e-3, gt=0, description="AdamW learning rate")
    warmup_steps: int = Field(default=10, ge=0, description="linear warm-up steps")
    batch_size: int = Field(default=32, ge=1, description="conversations per optimizer step")
    steps: int = Field(default=200, ge=1, description="optimizer steps")
    logit_chunk_tokens: int = Field(
        default=0,
        ge=0,
        description="positions whose vocabulary logits exist at once in the loss (memory on long "
        "conversations; the same loss); 0: the whole batch at once",
    )


class SFTRunSection(Section):
    out: str = Field(default="runs/sft", description="output directory (the model is saved here)")
    seed: int = Field(default=0, description="seed for data order and initialisation")
    progress: bool = Field(default=True, description="show a progress bar")
    checkpoint_every: int = Field(
        default=0,
        ge=0,
        description="save a resumable checkpoint under run.out/checkpoints every N steps and after the last "
        "(0: none); a rerun resumes from the latest",
    )
    keep_checkpoints: int = Field(default=2, ge=1, description="checkpoints kept on disk")


class SFTConfig(Section):
    model: ModelSection = Field(default_factory=ModelSection)
    data: SFTDataSection = Field(default_factory=SFTDataSection)
    optim: SFTOptimSection = Field(default_factory=SFTOptimSection)
    run: SFTRunSection = Field(default_factory=SFTRunSection)
    distributed: DistributedSection = Field(default_factory=DistributedSection)
