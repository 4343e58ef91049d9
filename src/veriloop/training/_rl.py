"""The RL trainer. ``RLTrainer.step`` is the whole algorithm, top to bottom:

    sample groups -> score (verifiers, inside the rollout) -> drop groups with no signal and
    refill -> shape rewards -> advantages -> clipped policy loss over micro-batches ->
    optimizer step -> weight sync -> metrics; ``train`` adds periodic evaluation and checkpoints.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from veriloop.algorithms import AGGREGATIONS, compute_advantages, kl_penalty, policy_loss
from veriloop.core import Task, Trajectory, UserError
from veriloop.rollout import EpisodeConfig, HFEngine, LeanDecoder, StopConfig, TrajectoryStore, rollout
from veriloop.scheduling import DomainSchedule
from veriloop.tasks import load_tasks
from veriloop.training._batch import TokenBatch, completion_logprobs, token_batch
from veriloop.training._checkpoint import list_checkpoints, load_trainer_state, save_checkpoint, set_rng_state
from veriloop.training._config import TrainConfig
from veriloop.training._data import SamplerState, TaskSampler
from veriloop.training._metrics import MetricsLogger
from veriloop.training._model import load_policy, reference_model, save_final


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


class RLTrainer:
    """GRPO-family RL on a Hugging Face causal LM, with the rollout engine sharing its weights."""

    def __init__(self, config: TrainConfig, tasks: Sequence[Task] | None = None, heldout: Sequence[Task] | None = None, tools: Any = None):
        self.config = config
        self.out = Path(config.run.out)
        self.checkpoint_dir = self.out / "checkpoints"
        seed_everything(config.run.seed)
        self.heldout = list(heldout) if heldout is not None else (load_tasks(config.data.heldout) if config.data.heldout else [])
        # The multi-domain schedule (veriloop.scheduling), when configured, loads the tasks and replaces TaskSampler.
        self.schedule = DomainSchedule.from_config(config.schedule, config.run.seed, self.out, tasks=tasks, train=config.data.train,
                                                   heldout=self.heldout) if config.schedule.active else None
        self.tasks = self.schedule.tasks if self.schedule is not None else (list(tasks) if tasks is not None else load_tasks(config.data.train))
        self._owns_tools = tools is None
        self.tools = tools if tools is not None else _sandbox_tools(config)
        checkpoints = list_checkpoints(self.checkpoint_dir)
        resume_from = checkpoints[-1] if checkpoints else None
        self.model, self.tokenizer = load_policy(config.model, resume_from / "model" if resume_from else None)
        self.reference = reference_model(self.model, config.model) if config.algorithm.beta > 0 else None
        self.engine = HFEngine(self.model, self.tokenizer, max_batch_size=config.rollout.max_batch_size)
        self.reference_lean = LeanDecoder(self.reference) if self.reference is not None and LeanDecoder.supports(self.reference) else None
        trainable = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(trainable, lr=config.optim.lr, weight_decay=config.optim.weight_decay)
        warmup = max(config.optim.warmup_steps, 1)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda s: min(1.0, (s + 1) / warmup))
        self.sampler = self.schedule if self.schedule is not None else TaskSampler(self.tasks, config.run.seed)
        self.step_index = 0
        self.episode = EpisodeConfig(
            temperature=config.rollout.temperature, top_p=config.rollout.top_p,
            max_tokens_per_turn=config.rollout.max_tokens, tools=config.rollout.tools,
            stop=StopConfig(max_turns=config.rollout.max_turns, max_total_tokens=config.rollout.max_tokens * config.rollout.max_turns * 4),
        )
        self.metrics = MetricsLogger(self.out, config.run.loggers, config.model_dump(mode="json"))
        self.store = TrajectoryStore(self.out / "trajectories") if config.run.save_trajectories else None
        if resume_from is not None:
            self._resume(resume_from)

    # ---- the algorithm ---------------------------------------------------------------------

    def step(self) -> dict[str, Any]:
        """One RL step. Returns its metrics (also logged)."""
        algo, started = self.config.algorithm, time.perf_counter()
        # 1-3. Sample groups; the rollout scores them with the verifiers. Groups with no
        # signal (all rewards equal) are dropped and refilled from fresh prompts.
        groups, sampling = self._sample_groups()
        self.step_index += 1
        if not groups:
            return self._log({"skipped": 1, **sampling, **self._schedule_metrics(groups), "time/step_s": time.perf_counter() - started})
        trajectories = [t for group in groups for t in group]
        # 4. Rewards, shaped: overlong answers penalised, KL as a reward penalty if asked.
        rewards, keep_mask = self._shaped_rewards(trajectories)
        batch = token_batch(trajectories, self.engine.pad_token_id)
        batch.loss_mask *= keep_mask[:, None]
        reference_logprobs = self._reference_logprobs(batch) if self.reference_needed else None
        if reference_logprobs is not None and algo.kl_mode == "reward":
            rewards = rewards - algo.beta * (kl_penalty(batch.sampler_logprobs, reference_logprobs, algo.kl_estimator) * batch.loss_mask).sum(1)
        # 5. Advantages per group, from rewards put on a per-domain scale when the schedule normalises.
        scaled = rewards if self.schedule is None else self.schedule.normalize(rewards, [t.domain for t in trajectories], self.config.rollout.group_size)
        advantages = compute_advantages(algo.advantage, scaled, self.config.rollout.group_size)
        # 6. Old log-probs: the sampler's, or recomputed (and the mismatch measured).
        old_logprobs, mismatch = self._old_logprobs(batch)
        # 7. Clipped policy loss over micro-batches, gradient accumulation, optimizer step.
        update = self._update(batch, old_logprobs, advantages, reference_logprobs)
        # 8. Weight sync: the engine shares the model; the new version tags later samples.
        self.engine.update_weights(None, self.engine.policy_version + 1)
        if self.store is not None:
            self.store.append(trajectories)
        return self._log({
            **sampling, **update, **mismatch, **self._schedule_metrics(groups),
            "reward/mean": float(torch.tensor([t.reward for t in trajectories]).mean()),
            "reward/shaped_mean": float(rewards.mean()),
            "pass_rate": sum(t.score.passed for t in trajectories) / len(trajectories),
            "response_tokens/mean": float(batch.loss_mask.sum(1).mean()),
            "policy_version": self.engine.policy_version,
            "time/step_s": time.perf_counter() - started,
        })

    @property
    def reference_needed(self) -> bool:
        return self.config.algorithm.beta > 0

    def _sample_groups(self) -> tuple[list[list[Trajectory]], dict[str, Any]]:
        cfg, algo = self.config.rollout, self.config.algorithm
        kept: list[list[Trajectory]] = []
        counts = {"groups/no_signal": 0, "groups/infra_error": 0, "groups/sampled": 0}
        rounds, rollout_s, generated = 0, 0.0, 0
        all_rewards: list[float] = []
        while len(kept) < cfg.prompts_per_step and rounds <= (algo.max_refills if algo.dynamic_sampling else 0):
            tasks = self.sampler.next(cfg.prompts_per_step - len(kept))
            seed = self.config.run.seed * 1_000_003 + self.step_index * 101 + rounds
            batch = rollout(tasks, self.engine, self.episode, group_size=cfg.group_size, concurrency=cfg.concurrency, seed=seed, tools=self.tools)
            rounds += 1
            if self.schedule is not None:  # every group, kept or not, informs the curriculum
                self.schedule.observe(batch.trajectories)
            rollout_s += batch.metrics.wall_s
            generated += batch.metrics.generated_tokens
            for start in range(0, len(batch.trajectories), cfg.group_size):
                group = list(batch.trajectories[start : start + cfg.group_size])
                counts["groups/sampled"] += 1
                if any(t.reward is None for t in group):
                    counts["groups/infra_error"] += 1
                    continue
                all_rewards += [t.reward for t in group]
                if algo.dynamic_sampling and len({t.reward for t in group}) == 1:
                    counts["groups/no_signal"] += 1
                    continue
                kept.append(group)
        return kept, {
            **counts, "groups/kept": len(kept), "sampling_rounds": rounds,
            "reward/sampled_mean": sum(all_rewards) / len(all_rewards) if all_rewards else 0.0,
            "time/rollout_s": rollout_s, "rollout_tokens_per_s": generated / max(rollout_s, 1e-9),
        }

    def _shaped_rewards(self, trajectories: list[Trajectory]) -> tuple[torch.Tensor, torch.Tensor]:
        """Rewards (N,) after overlong shaping, and a (N,) 0/1 mask of trajectories to train on."""
        algo, cfg = self.config.algorithm, self.config.rollout
        rewards = torch.tensor([t.reward for t in trajectories], dtype=torch.float)
        keep = torch.ones(len(trajectories))
        limit = cfg.max_tokens * cfg.max_turns
        for i, t in enumerate(trajectories):
            length = sum(t.loss_mask)
            if algo.overlong == "penalty" and length > limit - algo.overlong_buffer:
                excess = (length - (limit - algo.overlong_buffer)) / algo.overlong_buffer
                rewards[i] -= algo.overlong_penalty * min(1.0, excess)
            elif algo.overlong == "mask" and t.stop_reason == "max_tokens":
                keep[i] = 0.0
        return rewards, keep

    def _micro_batches(self, batch: TokenBatch) -> list[slice]:
        size = self.config.optim.micro_batch_size
        return [slice(i, min(i + size, len(batch))) for i in range(0, len(batch), size)]

    @torch.no_grad()
    def _reference_logprobs(self, batch: TokenBatch) -> torch.Tensor:
        out = []
        context = self.model.disable_adapter() if self.reference is None else contextlib.nullcontext()
        model = self.model if self.reference is None else self.reference
        lean = self.reference_lean if self.reference is not None else None
        with context:
            for rows in self._micro_batches(batch):
                logprobs, _ = completion_logprobs(model, batch.select(rows), self.config.rollout.temperature, lean=lean)
                out.append(logprobs.cpu())
        return torch.cat(out)

    def _old_logprobs(self, batch: TokenBatch) -> tuple[torch.Tensor, dict[str, float]]:
        if not self.config.algorithm.recompute_logprobs:
            return batch.sampler_logprobs, {}
        with torch.no_grad():
            recomputed = torch.cat([completion_logprobs(self.model, batch.select(r), self.config.rollout.temperature, lean=self.engine.lean)[0].cpu() for r in self._micro_batches(batch)])
        diff = (recomputed - batch.sampler_logprobs).abs() * batch.loss_mask
        tokens = batch.loss_mask.sum().clamp(min=1)
        return recomputed, {"logprob_mismatch/mean_abs": float(diff.sum() / tokens), "logprob_mismatch/max_abs": float(diff.max())}

    def _update(self, batch: TokenBatch, old_logprobs: torch.Tensor, advantages: torch.Tensor, reference_logprobs: torch.Tensor | None) -> dict[str, float]:
        """``updates_per_batch`` optimizer steps, each on the gradient of the whole batch."""
        optim = self.config.optim
        started = time.perf_counter()
        sums: dict[str, float] = {}
        self.model.train()
        for _ in range(optim.updates_per_batch):
            self.optimizer.zero_grad(set_to_none=True)
            stats = self._accumulate_gradients(batch, old_logprobs, advantages, reference_logprobs)
            for key, value in stats.items():
                sums[key] = sums.get(key, 0.0) + value / optim.updates_per_batch
            grad_norm = torch.nn.utils.clip_grad_norm_([p for p in self.model.parameters() if p.requires_grad], optim.max_grad_norm)
            self.optimizer.step()
            self.scheduler.step()
        self.model.eval()
        return {**sums, "grad_norm": float(grad_norm), "lr": self.scheduler.get_last_lr()[0], "time/update_s": time.perf_counter() - started}

    def _accumulate_gradients(self, batch: TokenBatch, old_logprobs: torch.Tensor, advantages: torch.Tensor, reference_logprobs: torch.Tensor | None) -> dict[str, float]:
        """Backward the loss micro-batch by micro-batch; returns batch-weighted loss statistics.

        Each micro-batch's loss is weighted by its share of the batch (tokens for token-mean,
        sequences otherwise), so any micro-batch size gives the gradient of one big batch.
        """
        algo = self.config.algorithm
        aggregate = AGGREGATIONS.get(algo.aggregation)
        total_tokens = float(batch.loss_mask.sum().clamp(min=1))
        sums: dict[str, float] = {}
        for rows in self._micro_batches(batch):
            micro = batch.select(rows)
            weight = float(micro.loss_mask.sum()) / total_tokens if algo.aggregation == "token-mean" else len(micro) / len(batch)
            logprobs, entropy = completion_logprobs(self.model, micro, self.config.rollout.temperature, with_entropy=algo.entropy_coef > 0, lean=self.engine.lean)
            device = logprobs.device
            mask = micro.loss_mask.to(device)
            loss, stats = policy_loss(
                logprobs, old_logprobs[rows].to(device), advantages[rows].to(device), mask,
                clip_low=algo.clip_low, clip_high=algo.clip_high, aggregation=algo.aggregation, dual_clip=algo.dual_clip,
            )
            stats["policy_loss"] = float(loss.detach())
            if reference_logprobs is not None and algo.kl_mode == "loss":
                kl = aggregate(kl_penalty(logprobs, reference_logprobs[rows].to(device), algo.kl_estimator), mask)
                loss = loss + algo.beta * kl
                stats["kl"] = float(kl.detach())
            if entropy is not None:
                entropy_mean = aggregate(entropy, mask)
                loss = loss - algo.entropy_coef * entropy_mean
                stats["entropy"] = float(entropy_mean.detach())
            (loss * weight).backward()
            for key, value in stats.items():
                sums[key] = sums.get(key, 0.0) + value * weight
        return sums

    # ---- the loop around it --------------------------------------------------------------

    def evaluate(self) -> dict[str, float]:
        """Sampled pass@1 on the held-out tasks (``run.eval_samples`` samples each), per domain too."""
        batch = rollout(self.heldout, self.engine, self.episode, group_size=self.config.run.eval_samples,
                        concurrency=self.config.rollout.concurrency, seed=10_007, tools=self.tools)
        by_domain: dict[str, list[float]] = {}
        for t in batch.trajectories:
            by_domain.setdefault(t.domain, []).append(float(t.score is not None and t.score.passed))
        everything = [v for values in by_domain.values() for v in values]
        metrics = {"eval/pass@1": sum(everything) / max(len(everything), 1)}
        metrics.update({f"eval/{domain}/pass@1": sum(v) / len(v) for domain, v in by_domain.items()})
        return metrics

    def train(self, on_step: Any = None) -> list[dict[str, Any]]:
        """Run until ``run.steps``; evaluate and checkpoint on schedule; save ``OUT/final``."""
        run = self.config.run
        history = []
        self._seesaw_check()  # the baseline, before the first step
        while self.step_index < run.steps and not (self.schedule is not None and self.schedule.stop_requested):
            metrics = self.step()
            if run.eval_every and self.heldout and self.step_index % run.eval_every == 0:
                evaluation = self.evaluate()
                self.metrics.log(self.step_index, evaluation)
                metrics.update(evaluation)
            metrics.update(self._seesaw_check())
            if run.checkpoint_every and self.step_index % run.checkpoint_every == 0:
                self.save_checkpoint()
            history.append(metrics)
            if on_step is not None:
                on_step(self.step_index, metrics)
        if not run.checkpoint_every or self.step_index % run.checkpoint_every:
            self.save_checkpoint()
        save_final(self.model, self.tokenizer, self.out / "final")
        self.metrics.close()
        if self._owns_tools and self.tools is not None:
            self.tools.sandbox.close()
        return history

    def save_checkpoint(self) -> Path:
        return save_checkpoint(
            self.checkpoint_dir, self.step_index, self.model, self.tokenizer, self.optimizer, self.scheduler,
            self.sampler.state, {"policy_version": self.engine.policy_version}, self.config.run.keep_checkpoints,
        )

    def _resume(self, checkpoint: Path) -> None:
        state = load_trainer_state(checkpoint)
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        set_rng_state(state["rng"])
        if self.schedule is not None:
            self.schedule.load_state(state["sampler"])
        else:
            fields = {f.name for f in dataclasses.fields(SamplerState)}
            if set(state["sampler"]) != fields:
                raise UserError(f"{checkpoint}: saved by a run with a schedule section; resume it with the same config")
            self.sampler = TaskSampler(self.tasks, self.config.run.seed, SamplerState(**state["sampler"]))
        self.step_index = state["step"]
        self.engine.policy_version = state["extra"]["policy_version"]
        self.metrics.truncate_after(self.step_index)

    def _schedule_metrics(self, groups: list[list[Trajectory]]) -> dict[str, Any]:
        """Per-domain accounting and ``domain/<name>/...`` metrics of the step (schedule only)."""
        return self.schedule.step_metrics(groups) if self.schedule is not None else {}

    def _seesaw_check(self) -> dict[str, Any]:
        """The schedule's held-out check per domain when due; its metrics are logged."""
        if self.schedule is None or not self.schedule.seesaw_due(self.step_index):
            return {}
        result = self.schedule.check_seesaw(self.step_index, self.engine, self.episode)
        self.metrics.log(self.step_index, result)
        return result

    def _log(self, metrics: dict[str, Any]) -> dict[str, Any]:
        self.metrics.log(self.step_index, metrics)
        return metrics


def _sandbox_tools(config: TrainConfig) -> Any:
    """Sandbox-backed tools when the episodes may run code; None when they cannot."""
    if not {"python", "shell"} & set(config.rollout.tools):
        return None
    from veriloop.rollout import SandboxTools
    from veriloop.sandbox import Sandbox

    return SandboxTools(Sandbox(workers=2))


def read_metrics(out: str | Path) -> list[dict[str, Any]]:
    """The per-step records a run wrote to ``OUT/metrics.jsonl``."""
    path = Path(out) / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()] if path.exists() else []


