"""The RL trainer. ``RLTrainer.step`` is the whole algorithm, top to bottom:

    sample groups -> score (verifiers, inside the rollout) -> drop groups with no signal and
    refill -> shape rewards -> advantages -> the objective over micro-batches (``objective``
    in ``_objective.py``: clipped policy loss, KL, entropy) -> optimizer step -> weight sync ->
    metrics; ``train`` adds periodic evaluation and checkpoints.

Rollouts run on the backend ``rollout_backend_for`` picks (``_backends.py``); step timing is kept
by a ``StepTimer`` (``_step_timer.py``). All that the steps change is one record, ``trainer.state``
(``RunState``, ``_run_state.py``), which checkpoints save with the weights (``_rl_checkpoint.py``).
"""

from __future__ import annotations

import copy
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from veriloop.algorithms import compute_advantages, kl_penalty
from veriloop.core import Task, Trajectory, UserError, ensure_strict_blas, load_plugins
from veriloop.rollout import (
    HFEngine,
    LeanDecoder,
    RolloutBatch,
    TrajectoryStore,
    context_summary,
    summarize_rollout,
)
from veriloop.training._backends import rollout_backend_for
from veriloop.training._batch import (
    TokenBatch,
    completion_logprobs,
    enable_activation_checkpointing,
    logprobs_without_grad,
    micro_batch_plan,
    token_batch,
)
from veriloop.training._config import TrainConfig
from veriloop.training._data import TaskSampler, seed_everything, training_tasks
from veriloop.training._distributed import check_data_parallel, process_group_for
from veriloop.training._heartbeat import Heartbeats, Stall
from veriloop.training._ledger import PromptLedger
from veriloop.training._metrics import MetricsLogger
from veriloop.training._model import load_policy, reference_model, save_final
from veriloop.training._objective import LossInputs, MismatchTally, has_dropout, loss_inputs, objective
from veriloop.training._rl_checkpoint import RLCheckpoints, resume_rl
from veriloop.training._run_state import RunState
from veriloop.training._parallel_strategy import as_float, strategy_for
from veriloop.training._pipeline import AsyncSampler, Draw, SampledBatch, staleness_metrics
from veriloop.sandbox import environment_hashes
from veriloop.training._run_config import check_and_save_environments, check_and_save_run_config
from veriloop.training._rollout_worker import WorkerSpec, episode_config, run_rollout, sandbox_tools
from veriloop.training._step_timer import StepTimer


class RLTrainer:
    """GRPO-family RL on a Hugging Face causal LM.

    Rollouts run on a backend chosen by ``pipeline``: the trainer's own engine, sharing its
    weights (sync, local), or workers with their own copies that receive the weights after each
    update (async, or Ray), which may sample up to ``pipeline.max_staleness`` steps ahead.

    Started as one rank of several (torchrun, or the Ray launcher), it trains data-parallel with
    the others (``_distributed.py``): each rank samples and trains on its share of the step, the
    step equals the single-process step, and only rank 0 writes under ``run.out``.
    """

    def __init__(
        self,
        config: TrainConfig,
        tasks: Sequence[Task] | None = None,
        heldout: Sequence[Task] | None = None,
        tools: Any = None,
    ):
        ensure_strict_blas()  # before the policy loads: its samples and updates must not depend on batch shapes
        self.config = config
        self.ranks = process_group_for(config.distributed, config.model.device)
        check_data_parallel(config, self.ranks.world_size)
        load_plugins(config.plugins)  # a config built in Python has not loaded them yet
        self.out = Path(config.run.out)
        # Ranks other than 0 keep their (identical) logs in a private directory, removed at close.
        self._scratch = (
            None if self.ranks.is_main else Path(tempfile.mkdtemp(prefix=f"veriloop-rank{self.ranks.rank}-"))
        )
        logs = self._scratch or self.out
        self.checkpoints = RLCheckpoints.of_run(config)  # under OUT/checkpoints
        self.checkpoint_dir = self.checkpoints.root
        seed_everything(config.run.seed)
        self.tasks, self.heldout, self.schedule = training_tasks(config, tasks, heldout)
        self._owns_tools = tools is None
        if tools is None:
            tools = sandbox_tools(config.rollout.tools, config.pipeline.sandbox_workers)
        self.tools = tools
        if config.pipeline.torch_threads:
            torch.set_num_threads(config.pipeline.torch_threads)
        resume_from = self.checkpoints.latest()
        main = self.ranks.is_main
        check_and_save_run_config(self.out, config, resuming=resume_from is not None, save=main)
        environments = environment_hashes(t.environment for t in self.tasks if t.environment)
        check_and_save_environments(self.out, environments, config, resuming=resume_from is not None, save=main)
        self.model, self.tokenizer = load_policy(config.model, resume_from / "model" if resume_from else None)
        self.reference = reference_model(self.model, config.model) if config.algorithm.beta > 0 else None
        rollout = config.rollout
        self.engine = HFEngine(
            self.model, self.tokenizer, max_batch_size=rollout.max_batch_size, sample_dtype=rollout.dtype
        )
        if config.optim.activation_checkpointing and self.engine.lean is None:
            enable_activation_checkpointing(self.model)  # the lean pass checkpoints its own layers
        self.reference_lean = (
            LeanDecoder(self.reference) if self.reference is not None and LeanDecoder.supports(self.reference) else None
        )
        # ddp or fsdp (``_parallel_strategy.py``); fsdp shards the model's parameters in place.
        self.parallel = strategy_for(config.distributed.strategy, self.ranks, self.model, config.model.device)
        sampler = self.schedule if self.schedule is not None else TaskSampler(self.tasks, config.run.seed)
        trainable = [p for p in self.model.parameters() if p.requires_grad]
        self.state = RunState.start(trainable, config.optim, sampler)  # all that steps change (``_run_state.py``)
        self.parallel.gather_weights()  # fsdp: the engine samples from the full weights
        self.episode = episode_config(config)
        self.metrics = MetricsLogger(logs, config.run.loggers if main else (), config.model_dump(mode="json"))
        self.store = TrajectoryStore(self.out / "trajectories") if config.run.save_trajectories and main else None
        self.ledger = PromptLedger(logs)
        self.heartbeats = Heartbeats(config.pipeline.stall_after_s, logs, on_stall=_warn_stall)
        if resume_from is not None:
            resume_rl(resume_from, self.state, self.parallel, self.ledger, self.metrics, self.store)
            self.engine.policy_version = self.state.policy_version
        self._next_draw = self.state.draws  # the producer's count, ahead of ``state.draws`` in async mode
        if config.rollout.engine == "vllm" and self.ranks.world_size > 1:
            raise UserError("rollout.engine=vllm samples beside one trainer process; run it without torchrun")
        self.backend = rollout_backend_for(config, engine=self.engine, tokenizer=self.tokenizer, tools=self.tools)
        self.pipeline: AsyncSampler | None = None
        self._unsent_weights: dict[str, torch.Tensor] | None = None
        self.timer = StepTimer()

    # ---- the algorithm ---------------------------------------------------------------------

    def step(self) -> dict[str, Any]:
        """One RL step. Returns its metrics (also logged)."""
        algo, group_size = self.config.algorithm, self.config.rollout.group_size
        self.timer.start()
        # 1-3. Sample groups; the rollout scores them with the verifiers. Groups with no
        # signal (all rewards equal) are dropped and refilled from fresh prompts. In async
        # mode the batch was sampled ahead, by a policy at most max_staleness versions old.
        sampled, queue_depth = self._next_batch()
        self.state.step += 1
        groups = sampled.groups
        if not groups:
            return self._finish_step(
                sampled, {"skipped": 1, **sampled.sampling, **self._schedule_metrics(groups)}, queue_depth
            )
        trajectories = [t for group in groups for t in group]
        # 4. Rewards, shaped: overlong answers penalised, KL as a reward penalty if asked.
        rewards, keep_mask = self._shaped_rewards(trajectories)  # (N,), (N,)
        # This rank trains on its share of the groups (one process: all of them). One row per
        # context the model saw (B >= N: a rewritten context trains as its segments).
        share = self.ranks.share(len(groups))
        first = share.start * group_size
        batch = token_batch(trajectories[first : share.stop * group_size], self.engine.pad_token_id)
        owner = batch.trajectory_index + first  # (B,) the trajectory of each row, in the whole step
        batch.loss_mask *= keep_mask[owner][:, None]  # (B, C)
        reference_logprobs = self._reference_logprobs(batch) if self.reference_needed else None  # (B, C)
        if reference_logprobs is not None and algo.kl_mode == "reward":
            kl = kl_penalty(batch.sampler_logprobs, reference_logprobs, algo.kl_estimator)  # (B, C)
            per_trajectory = torch.zeros_like(rewards).index_add(0, owner, (kl * batch.loss_mask).sum(1))  # (N,)
            rewards = rewards - algo.beta * self.ranks.sum_tensor(per_trajectory)  # every rank's rows
        # 5. Advantages per group, from rewards put on a per-domain scale when the schedule normalises.
        if self.schedule is not None:
            rewards_scaled = self.schedule.normalize(rewards, [t.domain for t in trajectories], group_size)
        else:
            rewards_scaled = rewards
        advantages = compute_advantages(algo.advantage, rewards_scaled, group_size)  # (N,)
        # 6. Old log-probs: the sampler's, or the trainer's recomputed ones; the engine-vs-trainer
        # mismatch measured and corrected by algorithm.correction (``loss_inputs``, ``_objective.py``).
        stale = sampled.policy_version < self.version
        tally = MismatchTally() if self._measures_in_update() else None
        inputs, correction = loss_inputs(
            batch,
            advantages[owner],
            reference_logprobs,
            stale,
            algo,
            lambda: self._recomputed(batch),
            self.ranks,
            measured_in_update=tally is not None,
        )
        # 7. The objective (policy loss, KL, entropy) over micro-batches, accumulated; optimizer step.
        update = self._update(inputs, tally)
        correction = tally.metrics(self.ranks) if tally is not None else correction
        # 8. Weight sync: the new version goes to the rollout backend and tags later samples.
        self._publish_weights(self.version + 1)
        if self.store is not None and self.store.append(trajectories) is not None:
            self.state.trajectory_parts += 1
        return self._finish_step(
            sampled,
            {
                **sampled.sampling,
                **update,
                **correction,
                **self._schedule_metrics(groups),
                **staleness_metrics(trajectories, self.version - 1),
                "reward/mean": float(torch.tensor([t.reward for t in trajectories]).mean()),
                "reward/shaped_mean": float(rewards.mean()),
                "pass_rate": sum(t.score.passed for t in trajectories) / len(trajectories),
                "response_tokens/mean": self.ranks.total([batch.loss_mask.sum()])[0] / len(trajectories),
            },
            queue_depth,
        )

    @property
    def version(self) -> int:
        """The trainer's policy version: how many updates its weights have had."""
        return self.state.policy_version

    # The record's parts under the names the trainer had before it (read-only).
    step_index = property(lambda self: self.state.step, doc="Steps taken: ``state.step``.")
    optimizer = property(lambda self: self.state.optimizer, doc="``state.optimizer``.")
    scheduler = property(lambda self: self.state.scheduler, doc="``state.scheduler``.")
    sampler = property(lambda self: self.state.sampler, doc="``state.sampler``.")
    draws = property(lambda self: self.state.draws, doc="``state.draws``.")
    trained_sampler_state = property(lambda self: self.state.trained_cursor, doc="``state.trained_cursor``.")

    def _next_batch(self) -> tuple[SampledBatch, int]:
        """The batch of the next step and the queue depth it found; the time it took is the step's wait."""
        with self.timer.phase("wait"):
            if self.pipeline is None:
                return self._sample_groups(self.state.step + 1), 0
            with self.heartbeats.phase("train", f"step {self.state.step + 1}: waiting for its batch"):
                sampled, _, queue_depth = self.pipeline.next()
                return sampled, queue_depth

    def _finish_step(self, sampled: SampledBatch, metrics: dict[str, Any], queue_depth: int) -> dict[str, Any]:
        """Accounting shared by trained and skipped steps: ledger, cursor, timing, log."""
        self.ledger.record(self.state.step, sampled.draws)
        self.state.draws += len(sampled.draws)
        self.state.trained_cursor = sampled.sampler_state
        if self.pipeline is not None:  # the producer may start the batch this step was holding back
            self.pipeline.step_done(self.state.step, self.version, self._unsent_weights)
            self._unsent_weights = None
        return self._log({**metrics, "policy_version": self.version, **self.timer.metrics(sampled, queue_depth)})

    @property
    def reference_needed(self) -> bool:
        return self.config.algorithm.beta > 0

    def _sample_groups(self, step: int) -> SampledBatch:
        """Groups for ``step``: sampling rounds until ``prompts_per_step`` groups have signal.

        Runs on the producer thread in async mode: it touches only the sampler and the backend.
        """
        cfg, algo = self.config.rollout, self.config.algorithm
        kept: list[list[Trajectory]] = []
        draws: list[Draw] = []
        counts = {"groups/no_signal": 0, "groups/infra_error": 0, "groups/sampled": 0}
        rounds, rollout_s, generated, engine_s, sandbox, verify_s = 0, 0.0, 0, 0.0, 0.0, 0.0
        all_rewards: list[float] = []
        sampled: list[Trajectory] = []  # every episode of every round (context figures)
        version = self.backend.policy_version
        started = time.monotonic()
        while len(kept) < cfg.prompts_per_step and rounds <= (algo.max_refills if algo.dynamic_sampling else 0):
            tasks = self.state.sampler.next(cfg.prompts_per_step - len(kept))
            seed = self.config.run.seed * 1_000_003 + (step - 1) * 101 + rounds
            doing = f"step {step}, round {rounds + 1}: {len(tasks)} prompts x {cfg.group_size} samples"
            self.heartbeats.beat("rollout", doing)

            def progress(done: int, total: int, doing: str = doing) -> None:
                self.heartbeats.beat("rollout", f"{doing}, {done}/{total} episodes done")

            batch = self._rollout_share(tasks, cfg.group_size, seed, progress)
            rounds += 1
            if self.schedule is not None:  # every group, kept or not, informs the curriculum
                self.schedule.observe(batch.trajectories)
            rollout_s += batch.metrics.wall_s
            sampled += batch.trajectories
            generated += batch.metrics.generated_tokens
            engine_s += batch.metrics.engine_busy_s
            sandbox += batch.metrics.sandbox_busy_fraction * batch.metrics.wall_s
            verify_s += batch.metrics.verify_busy_s
            for start in range(0, len(batch.trajectories), cfg.group_size):
                group = list(batch.trajectories[start : start + cfg.group_size])
                counts["groups/sampled"] += 1
                outcome = _group_outcome(group, algo.dynamic_sampling)
                draws.append(
                    Draw(
                        self._next_draw + len(draws),
                        group[0].task_id,
                        "trained" if outcome is None else "dropped",
                        outcome or "",
                    )
                )
                if outcome == "infra_error":
                    counts["groups/infra_error"] += 1
                    continue
                all_rewards += [t.reward for t in group]
                if outcome == "no_signal":
                    counts["groups/no_signal"] += 1
                    continue
                kept.append(group)
        self.heartbeats.idle("rollout")
        self._next_draw += len(draws)
        return SampledBatch(
            step,
            kept,
            {
                **counts,
                "groups/kept": len(kept),
                "sampling_rounds": rounds,
                "reward/sampled_mean": sum(all_rewards) / len(all_rewards) if all_rewards else 0.0,
                "time/rollout_s": rollout_s,
                "rollout_tokens_per_s": generated / max(rollout_s, 1e-9),
                "util/engine_busy_s": engine_s,
                "util/sandbox_busy_fraction": sandbox / max(rollout_s, 1e-9),
                "util/verify_busy_s": verify_s,  # summed over episodes (code verifiers: time in the sandbox)
                **{f"context/{name}": value for name, value in context_summary(sampled).items()},
            },
            draws,
            copy.deepcopy(self.state.sampler.state),
            version,
            busy_s=time.monotonic() - started,
        )

    def _rollout_share(self, tasks: list[Task], group_size: int, seed: int, progress: Any) -> RolloutBatch:
        """The round's rollout of ``tasks``: this rank samples its share, the shares are gathered in
        rank order, so every rank holds the batch one process samples (episode seeds follow each
        task's index in the whole round)."""
        if self.ranks.world_size == 1:
            return self.backend.rollout(tasks, group_size, seed, progress=progress)
        share = self.ranks.share(len(tasks))
        mine = self.backend.rollout(
            tasks[share.start : share.stop], group_size, seed, progress=progress, first_task_index=share.start
        )
        parts = self.ranks.gather(mine)
        trajectories = tuple(t for part in parts for t in part.trajectories)
        wall_s = max(part.metrics.wall_s for part in parts)  # the ranks sample side by side
        engine_busy_s = sum(part.metrics.engine_busy_s for part in parts)
        sandbox_workers = self.config.pipeline.sandbox_workers * self.ranks.world_size
        return RolloutBatch(trajectories, summarize_rollout(trajectories, wall_s, sandbox_workers, engine_busy_s))

    def _shaped_rewards(self, trajectories: list[Trajectory]) -> tuple[torch.Tensor, torch.Tensor]:
        """Rewards (N,) after overlong shaping, and a (N,) 0/1 mask of trajectories to train on.

        A trajectory's length is measured against its own budget: its domain's tokens per turn
        times the turns."""
        algo, cfg = self.config.algorithm, self.config.rollout
        rewards = torch.tensor([t.reward for t in trajectories], dtype=torch.float)
        keep = torch.ones(len(trajectories))
        for i, t in enumerate(trajectories):
            limit = self.episode.max_tokens_for(t.domain) * cfg.max_turns
            length = sum(sum(c.loss_mask) for c in t.contexts())
            if algo.overlong == "penalty" and length > limit - algo.overlong_buffer:
                excess = (length - (limit - algo.overlong_buffer)) / algo.overlong_buffer
                rewards[i] -= algo.overlong_penalty * min(1.0, excess)
            elif algo.overlong == "mask" and t.stop_reason == "max_tokens":
                keep[i] = 0.0
        return rewards, keep

    def _reference_logprobs(self, batch: TokenBatch) -> torch.Tensor:
        """(B, C) under the reference policy: the frozen copy, or the base model under LoRA adapters."""
        if self.reference is not None:
            return self._logprobs_without_grad(self.reference, batch, self.reference_lean)
        with self.model.disable_adapter():
            return self._logprobs_without_grad(self.model, batch, None)

    def _logprobs_without_grad(
        self, model: Any, batch: TokenBatch, lean: LeanDecoder | None, truncated: bool = False
    ) -> torch.Tensor:
        """(B, C) under ``model``; ``truncated``: in the top-k/top-p distribution the engine sampled from."""
        optim, rollout = self.config.optim, self.config.rollout
        return logprobs_without_grad(
            model,
            batch,
            rollout.temperature,
            optim.micro_batch_size,
            lean=lean,
            chunk_tokens=optim.logprob_chunk_tokens,
            autocast=optim.autocast,
            top_k=rollout.top_k if truncated else 0,
            top_p=rollout.top_p if truncated else 1.0,
            max_tokens=optim.max_tokens_per_micro_batch,
        )

    def _recomputed(self, batch: TokenBatch) -> torch.Tensor:
        """(B, C) the policy's log-probs of the batch under the trainer's weights, scored as the engine sampled."""
        return self._logprobs_without_grad(self.model, batch, self.engine.lean, truncated=True)

    def _measures_in_update(self) -> bool:
        """Whether the mismatch is read off the update's first pass (``MismatchTally``) rather than
        a pass of its own: measured, uncorrected, nothing recomputed, and no dropout."""
        algo = self.config.algorithm
        plain = algo.correction.mode == "none" and not algo.recompute_logprobs
        return algo.correction.measure and plain and not has_dropout(self.model)

    def _update(self, inputs: LossInputs, tally: MismatchTally | None = None) -> dict[str, float]:
        """``updates_per_batch`` optimizer steps, each on the gradient of the whole batch.

        The gradient is accumulated micro-batch by micro-batch, each micro-batch's loss weighted
        by its share of the batch (tokens for token-mean, sequences otherwise), so any micro-batch
        size or token budget (packing) gives the gradient of one big batch. Over several ranks the shares are of the whole
        step (counts summed over the ranks) and the gradients are summed across ranks before
        clipping, so any number of ranks gives that gradient too. Returns the batch-weighted loss
        statistics. ``tally`` counts the first pass's log-probs, taken before any optimizer step.
        """
        algo, optim = self.config.algorithm, self.config.optim
        dual_clip = self._dual_clip(inputs.stale)
        total_tokens, total_rows = self.ranks.total([inputs.batch.loss_mask.sum(), len(inputs)])  # whole step
        total_tokens = max(total_tokens, 1.0)
        sums: dict[str, float] = {}
        plan = micro_batch_plan(inputs.batch, optim.micro_batch_size, optim.max_tokens_per_micro_batch)
        self.model.train()
        doing = f"step {self.state.step}: update on {len(inputs)} sequences"
        with self.timer.phase("update"), self.heartbeats.phase("train", doing):
            for update_index in range(optim.updates_per_batch):
                self.state.optimizer.zero_grad(set_to_none=True)
                pass_sums: dict[str, float] = {}
                for rows in self.parallel.micro_batches(plan):
                    micro = inputs.select(rows)
                    tokens = float(micro.batch.loss_mask.sum())
                    weight = tokens / total_tokens if algo.aggregation == "token-mean" else len(micro) / total_rows
                    logprobs, entropy = completion_logprobs(
                        self.model,
                        micro.batch,
                        self.config.rollout.temperature,
                        with_entropy=algo.entropy_coef > 0,
                        lean=self.parallel.lean or self.engine.lean,
                        chunk_tokens=optim.logprob_chunk_tokens,
                        checkpoint_layers=optim.activation_checkpointing,
                        autocast=optim.autocast,
                        top_k=self.config.rollout.top_k,
                        top_p=self.config.rollout.top_p,
                        packed=optim.max_tokens_per_micro_batch > 0,
                    )
                    if tally is not None and update_index == 0:
                        tally.add(logprobs, micro.batch)
                    loss, stats = objective(logprobs, entropy, micro, algo, dual_clip)
                    (loss * weight).backward()
                    for key, value in stats.items():
                        pass_sums[key] = pass_sums.get(key, 0.0) + value * weight
                for part in self.ranks.gather(pass_sums):  # a rank with no rows adds nothing
                    for key, value in part.items():
                        sums[key] = sums.get(key, 0.0) + value / optim.updates_per_batch
                trainable = [p for group in self.state.optimizer.param_groups for p in group["params"]]
                self.parallel.reduce_gradients(trainable)  # (summed over ranks: the whole step's gradient)
                grad_norm = torch.nn.utils.clip_grad_norm_(trainable, optim.max_grad_norm)
                self.state.optimizer.step()
                self.state.scheduler.step()
            self.parallel.gather_weights()
        self.model.eval()
        return {**sums, "grad_norm": as_float(grad_norm), "lr": self.state.scheduler.get_last_lr()[0]}

    def _dual_clip(self, stale: bool) -> float | None:
        """The ratio cap for negative advantages: ``algorithm.dual_clip``, lowered to ``pipeline.is_cap``
        for stale samples under the ``behaviour`` correction (no ``algorithm.correction``: the ratio is
        then to the sampler's policy)."""
        algo, pipeline = self.config.algorithm, self.config.pipeline
        dual_clip = algo.dual_clip
        if stale and pipeline.stale_correction == "behaviour" and algo.correction.mode == "none":
            return min(dual_clip or float("inf"), pipeline.is_cap)
        return dual_clip

    # ---- the loop around it --------------------------------------------------------------

    def evaluate(self) -> dict[str, float]:
        """Sampled pass@1 on the held-out tasks (``run.eval_samples`` samples each), per domain too;
        each rank samples its share of the tasks."""
        share = self.ranks.share(len(self.heldout))
        tasks = self.heldout[share.start : share.stop]
        # The trainer's own engine, with the workers' settings: an agent run's program plays them too.
        spec = WorkerSpec.from_config(self.config, self.model)
        batch = run_rollout(self.engine, spec, self.tools, tasks, self.config.run.eval_samples, 10_007, share.start)
        by_domain: dict[str, list[float]] = {}
        for t in (t for part in self.ranks.gather(list(batch.trajectories)) for t in part):
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
        self._start_pipeline()
        try:
            while self.state.step < run.steps and not (self.schedule is not None and self.schedule.stop_requested):
                metrics = self.step()
                if run.eval_every and self.heldout and self.state.step % run.eval_every == 0:
                    doing = f"step {self.state.step}: {len(self.heldout)} held-out tasks"
                    with self.heartbeats.phase("evaluate", doing):
                        evaluation = self.evaluate()
                    self.metrics.log(self.state.step, evaluation)
                    metrics.update(evaluation)
                metrics.update(self._seesaw_check())
                if run.checkpoint_every and self.state.step % run.checkpoint_every == 0:
                    self.save_checkpoint()
                history.append(metrics)
                if on_step is not None:
                    on_step(self.state.step, metrics)
        finally:
            self._stop_pipeline()
        if not run.checkpoint_every or self.state.step % run.checkpoint_every:
            self.save_checkpoint()
        if self.ranks.is_main:
            save_final(self.model, self.tokenizer, self.out / "final", self.parallel.model_state(self.model))
        self.close()
        return history

    def close(self) -> None:
        """Release the rollout backend, the sandbox tools and the loggers."""
        self._stop_pipeline()
        self.backend.close()
        self.metrics.close()
        self.heartbeats.close()
        if self._owns_tools and self.tools is not None:
            self.tools.close()
            self.tools = None
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
        self.ranks.close()  # a barrier: every rank reaches its close

    def _start_pipeline(self) -> None:
        """Async mode: the producer thread starts sampling ahead of the trainer."""
        pipeline = self.config.pipeline
        if pipeline.mode == "async" and self.pipeline is None:
            self.pipeline = AsyncSampler(
                self._sample_groups,
                self.backend.set_weights,
                first_step=self.state.step + 1,
                last_step=self.config.run.steps,
                max_staleness=pipeline.max_staleness,
            )
            if pipeline.partial_rollouts:  # the worker's engine takes new weights between decode steps
                self.backend.engine.midway_weights = self.pipeline.take_pending
            self.pipeline.start()

    def _stop_pipeline(self) -> None:
        if self.pipeline is not None:
            self.pipeline.close()
            self.pipeline = None
            if getattr(self.backend, "engine", None) is not None:
                self.backend.engine.midway_weights = None

    def _publish_weights(self, version: int) -> None:
        """After an update: the new version goes into the record and the engine, the weights to the rollout backend."""
        self.state.policy_version = version
        self.engine.update_weights(None, version)  # the trainer's engine shares its model
        if not self.backend.receives_weights:
            return
        weights = self.backend.update_of(self.model, kept=self.pipeline is not None)  # read now, whenever loaded
        if self.pipeline is not None:
            self._unsent_weights = weights  # handed to the producer when the step is done
        else:
            self.backend.set_weights(version, weights)

    def save_checkpoint(self) -> Path | None:
        """Write the weights and ``state`` (``_rl_checkpoint.py``): every rank calls it, rank 0 writes it."""
        with self.heartbeats.phase("checkpoint", f"step {self.state.step}: saving"):
            return self.checkpoints.save(self.state, self.model, self.tokenizer, self.parallel)

    def _schedule_metrics(self, groups: list[list[Trajectory]]) -> dict[str, Any]:
        """Per-domain accounting and ``domain/<name>/...`` metrics of the step (schedule only)."""
        return self.schedule.step_metrics(groups) if self.schedule is not None else {}

    def _seesaw_check(self) -> dict[str, Any]:
        """The schedule's held-out check per domain when due; its metrics are logged."""
        if self.schedule is None or not self.schedule.seesaw_due(self.state.step):
            return {}
        result = self.schedule.check_seesaw(self.state.step, self.engine, self.episode)
        self.metrics.log(self.state.step, result)
        return result

    def _log(self, metrics: dict[str, Any]) -> dict[str, Any]:
        self.metrics.log(self.state.step, metrics)
        return metrics


def _group_outcome(group: list[Trajectory], dynamic_sampling: bool) -> str | None:
    """None when the group is trained on; otherwise why it is dropped."""
    if any(t.reward is None for t in group):
        return "infra_error"
    if dynamic_sampling and len({t.reward for t in group}) == 1:
        return "no_signal"
    return None


def _warn_stall(stall: Stall) -> None:
    print(
        f"veriloop: {stall.phase} has made no progress for {stall.quiet_s:.0f} s: {stall.doing}",
        file=sys.stderr,
        flush=True,
    )
