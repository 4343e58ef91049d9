"""The multi-domain schedule of one training run, as the trainer sees it.

``DomainSchedule`` has ``TaskSampler``'s interface (``next(n)``, ``state``), so it takes the
sampler's place, and adds four hooks the RL step calls: ``observe`` (every sampled group: the
curriculum's estimates and per-domain reward), ``normalize`` (rewards before advantages),
``step_metrics`` (per-domain accounting and metrics of the step) and the seesaw check.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from veriloop.core import Task, Trajectory, UserError
from veriloop.scheduling._config import ScheduleConfig
from veriloop.scheduling._curriculum import Curriculum, CurriculumState
from veriloop.scheduling._load import load_mixture
from veriloop.scheduling._mixture import MixtureState, TaskMixture, group_by_domain
from veriloop.scheduling._normalization import NormalizerState, RewardNormalizer
from veriloop.scheduling._seesaw import SeesawMonitor, SeesawState
from veriloop.scheduling._weights import mixture_weights
from veriloop.tasks import load_tasks


@dataclass
class ScheduleState:
    """Everything a resumed run needs to continue the schedule exactly."""

    mixture: MixtureState
    curriculum: CurriculumState
    normalizer: NormalizerState
    seesaw: SeesawState

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ScheduleState:
        try:
            return cls(
                MixtureState(**data["mixture"]),
                CurriculumState(**data["curriculum"]),
                NormalizerState(**data["normalizer"]),
                SeesawState(**data["seesaw"]),
            )
        except (KeyError, TypeError):
            raise UserError(
                "the checkpoint's sampler state is not a multi-domain schedule's (it was saved without "
                "schedule settings); resume with the settings it was saved with, or use another run.out"
            ) from None


def _groups(trajectories: Sequence[Trajectory]) -> list[list[Trajectory]]:
    """A rollout's trajectories cut into groups: each group starts at sample index 0."""
    groups: list[list[Trajectory]] = []
    for t in trajectories:
        if groups and t.sample_index != 0:
            groups[-1].append(t)
        else:
            groups.append([t])
    return groups


class DomainSchedule:
    """Mixture sampling (with an optional curriculum), per-domain normalisation, seesaw checks."""

    def __init__(
        self,
        tasks: Sequence[Task],
        config: ScheduleConfig,
        seed: int,
        *,
        weights: Mapping[str, float | None] | None = None,
        heldout: Sequence[Task] = (),
        out: str | Path = ".",
        state: ScheduleState | None = None,
    ):
        self.tasks = list(tasks)
        self.config, self.seed, self.heldout, self.out = config, seed, list(heldout), Path(out)
        sizes = {domain: len(group) for domain, group in group_by_domain(self.tasks).items()}
        unknown = sorted(set(config.weights) - set(sizes))
        if unknown:
            raise UserError(
                f"schedule.weights names domains the tasks do not have ({', '.join(unknown)}); "
                f"known: {', '.join(sizes)}"
            )
        self.shares = mixture_weights(
            config.weighting, sizes, {**(weights or {}), **config.weights}, config.temperature
        )
        self._task_ids = {domain: [t.id for t in group] for domain, group in group_by_domain(self.tasks).items()}
        self._assemble(state)

    def _assemble(self, state: ScheduleState | None) -> None:
        c = self.config
        self.curriculum = (
            Curriculum(
                c.curriculum_low,
                c.curriculum_high,
                c.curriculum_smoothing,
                c.curriculum_retry_every,
                c.curriculum_retire_after,
                state.curriculum if state else None,
            )
            if c.curriculum
            else None
        )
        self.mixture = TaskMixture(
            self.tasks, self.shares, self.seed, state.mixture if state else None, self.curriculum
        )
        self.normalizer = RewardNormalizer(c.normalization, state.normalizer if state else None)
        self.seesaw = SeesawMonitor(
            self.heldout,
            self.out / "seesaw",
            c.seesaw_every,
            samples=c.seesaw_samples,
            min_delta=c.seesaw_min_delta,
            action=c.seesaw_action,
            factor=c.seesaw_reweight_factor,
            seed=self.seed,
            state=state.seesaw if state else None,
        )
        self._drawn_before = dict(self.mixture.state.drawn)
        self._sampled: dict[str, list[float]] = {}  # domain -> [reward sum, scored samples, passed]

    @classmethod
    def from_config(
        cls,
        config: ScheduleConfig,
        seed: int,
        out: str | Path,
        *,
        tasks: Sequence[Task] | None = None,
        train: str = "",
        heldout: Sequence[Task] = (),
    ) -> DomainSchedule:
        """Tasks given here win; else the mixture's files; else the ``train`` file.

        Seesaw checks use the mixture's held-out files when it names any, else ``heldout``.
        """
        if tasks is None and config.mixture:
            data = load_mixture(config.mixture)
            return cls(data.tasks, config, seed, weights=data.weights, heldout=data.heldout or heldout, out=out)
        if tasks is None and not train:
            raise UserError("no training tasks: set data.train or schedule.mixture")
        return cls(load_tasks(train) if tasks is None else tasks, config, seed, heldout=heldout, out=out)

    # ---- the sampler interface -------------------------------------------------------------

    def next(self, count: int) -> list[Task]:
        return self.mixture.next(count)

    @property
    def state(self) -> ScheduleState:
        return ScheduleState(
            self.mixture.state,
            self.curriculum.state if self.curriculum else CurriculumState(),
            self.normalizer.state,
            self.seesaw.state,
        )

    def load_state(self, data: Mapping[str, Any]) -> None:
        """Continue from a checkpoint's ``dataclasses.asdict(state)``."""
        self._assemble(ScheduleState.from_dict(data))

    # ---- hooks of the RL step --------------------------------------------------------------

    def observe(self, trajectories: Sequence[Trajectory]) -> None:
        """Every sampled group, kept or not: per-domain reward and the curriculum's estimates."""
        for group in _groups(trajectories):
            scored = [t for t in group if t.reward is not None]
            passed = sum(bool(t.score is not None and t.score.passed) for t in scored)
            totals = self._sampled.setdefault(group[0].domain, [0.0, 0, 0])
            totals[0] += sum(t.reward for t in scored)
            totals[1] += len(scored)
            totals[2] += passed
            if self.curriculum is not None and scored and len(scored) == len(group):
                self.curriculum.observe(group[0].task_id, passed, len(group))

    def normalize(self, rewards: torch.Tensor, domains: Sequence[str], group_size: int) -> torch.Tensor:
        """Rewards (N,) on a per-domain scale by ``config.normalization``."""
        return self.normalizer(rewards, domains, group_size)

    def step_metrics(self, groups: Sequence[Sequence[Trajectory]]) -> dict[str, Any]:
        """Count the trained groups; the step's ``domain/<name>/...`` metrics."""
        trained = Counter(group[0].domain for group in groups)
        self.mixture.record_trained(group[0].domain for group in groups)
        s, kept = self.mixture.state, sum(trained.values())
        metrics: dict[str, Any] = {}
        for domain in self.mixture.domains:
            prefix = f"domain/{domain}/"
            metrics.update(
                {
                    prefix + "weight": s.weights[domain],
                    prefix + "drawn": s.drawn[domain] - self._drawn_before.get(domain, 0),
                    prefix + "trained": trained[domain],
                    prefix + "share": trained[domain] / kept if kept else 0.0,
                    prefix + "drawn_total": s.drawn[domain],
                    prefix + "trained_total": s.trained[domain],
                }
            )
            reward_sum, scored, passed = self._sampled.get(domain, (0.0, 0, 0))
            if scored:
                metrics.update({prefix + "reward": reward_sum / scored, prefix + "pass_rate": passed / scored})
            if domain in self.normalizer.last_scales:
                metrics[prefix + "reward_scale"] = self.normalizer.last_scales[domain]
            if self.curriculum is not None:
                metrics.update(
                    {prefix + bucket: n for bucket, n in self.curriculum.counts(self._task_ids[domain]).items()}
                )
        if self.curriculum is not None:
            metrics["curriculum/retired"] = len(self.curriculum.state.retired)
        self._drawn_before, self._sampled, self.normalizer.last_scales = dict(s.drawn), {}, {}
        return metrics

    # ---- the seesaw check --------------------------------------------------------------------

    def seesaw_due(self, step: int) -> bool:
        return self.seesaw.due(step)

    def check_seesaw(self, step: int, engine: Any, episode: Any) -> dict[str, Any]:
        """Held-out evaluation per domain with ``engine``; warns and acts on a seesaw."""
        return self.seesaw.check(step, engine, episode, self.mixture)

    @property
    def stop_requested(self) -> bool:
        return self.seesaw.state.stopped
