"""The seesaw monitor: per-domain held-out evaluation during training, through the evaluation
layer, and a warning, a metric and an optional rule when one domain falls while another rises.

The first check is the baseline (before the first step when training starts from scratch).
Each later check is compared with it task by task (``veriloop.evaluation.compare``, a paired
bootstrap): a domain *rises* or *falls* when its pass@1 moved by at least ``min_delta`` and
the 95% interval of the change excludes zero. Rising and falling domains at once is a seesaw.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from veriloop.core import Registry, Task, UserError
from veriloop.evaluation import EvalSample, compare, load_run, run_eval
from veriloop.scheduling._mixture import TaskMixture

log = logging.getLogger("veriloop.scheduling")


@dataclass(frozen=True)
class SeesawVerdict:
    """One check against the baseline: which domains rose or fell, by how much."""

    step: int
    deltas: dict[str, float]  # domain -> pass@1 change since the baseline
    fired: bool
    rising: tuple[str, ...] = ()
    falling: tuple[str, ...] = ()
    message: str = ""


def judge_seesaw(
    baseline: Sequence[EvalSample],
    current: Sequence[EvalSample],
    *,
    step: int = 0,
    min_delta: float = 0.05,
    seed: int = 0,
) -> SeesawVerdict:
    """Compare ``current`` with ``baseline`` per domain; fired when some rose and some fell."""
    comparison = compare(baseline, current, seed=seed)
    domains = comparison.domains[1:]
    rising = tuple(d.domain for d in domains if d.significant and d.delta >= min_delta)
    falling = tuple(d.domain for d in domains if d.significant and -d.delta >= min_delta)
    fired = bool(rising and falling)
    detail = ", ".join(f"{d.domain} {d.a:.3f} -> {d.b:.3f}" for d in domains if d.domain in rising + falling)
    message = (
        f"seesaw at step {step}: {', '.join(falling)} fell while {', '.join(rising)} rose ({detail})" if fired else ""
    )
    return SeesawVerdict(step, {d.domain: d.delta for d in domains}, fired, rising, falling, message)


SeesawAction = Callable[[SeesawVerdict, TaskMixture, float], bool]
SEESAW_ACTIONS: Registry[SeesawAction] = Registry("seesaw action")


@SEESAW_ACTIONS.register("warn")
def warn_only(verdict: SeesawVerdict, mixture: TaskMixture, factor: float) -> bool:
    """The warning and the metric only."""
    return False


@SEESAW_ACTIONS.register("reweight")
def lower_rising(verdict: SeesawVerdict, mixture: TaskMixture, factor: float) -> bool:
    """Multiply each rising domain's share by ``factor``, so the falling ones get more draws."""
    for domain in verdict.rising:
        mixture.reweight(domain, factor)
    return False


@SEESAW_ACTIONS.register("stop")
def stop_run(verdict: SeesawVerdict, mixture: TaskMixture, factor: float) -> bool:
    """Stop the run (after this step's checkpoint)."""
    return True


@dataclass
class SeesawState:
    baseline_step: int = -1  # the check the others are compared with (-1: none yet)
    last_step: int = -1
    checks: int = 0
    fired: int = 0
    stopped: bool = False


class SeesawMonitor:
    """Runs the held-out checks every ``every`` steps and applies the named action."""

    def __init__(
        self,
        heldout: Sequence[Task],
        out: Path,
        every: int,
        *,
        samples: int = 4,
        min_delta: float = 0.05,
        action: str = "warn",
        factor: float = 0.5,
        seed: int = 0,
        state: SeesawState | None = None,
    ):
        if every and not heldout:
            raise UserError(
                "schedule.seesaw_every needs held-out tasks: give schedule.mixture[].heldout or data.heldout"
            )
        self.heldout, self.out, self.every = list(heldout), Path(out), every
        self.samples, self.min_delta, self.factor, self.seed = samples, min_delta, factor, seed
        self.action = SEESAW_ACTIONS.get(action)
        self.state = state or SeesawState()

    def due(self, step: int) -> bool:
        s = self.state
        return (
            bool(self.every)
            and not s.stopped
            and step > s.last_step
            and (s.baseline_step < 0 or step % self.every == 0)
        )

    def _directory(self, step: int) -> Path:
        return self.out / f"step-{step:08d}"

    def check(self, step: int, engine: Any, episode: Any, mixture: TaskMixture) -> dict[str, Any]:
        """Evaluate the held-out tasks with ``engine``; returns the check's metrics."""
        directory = self._directory(step)
        shutil.rmtree(directory, ignore_errors=True)  # a check cut short before a resume starts over
        summary = run_eval(
            engine,
            self.heldout,
            samples=self.samples,
            out=directory,
            episode=episode,
            seed=self.seed,
            record=False,
            model_label=f"step {step}",
        )
        s = self.state
        s.last_step, s.checks = step, s.checks + 1
        metrics: dict[str, Any] = {
            f"domain/{d}/heldout_pass@1": block["pass@1"] for d, block in summary["domains"].items()
        }
        if s.baseline_step < 0:
            s.baseline_step = step
            return {**metrics, "seesaw/baseline_step": step}
        verdict = judge_seesaw(
            load_run(self._directory(s.baseline_step)).samples,
            load_run(directory).samples,
            step=step,
            min_delta=self.min_delta,
            seed=self.seed,
        )
        metrics.update({f"domain/{d}/heldout_delta": delta for d, delta in verdict.deltas.items()})
        metrics["seesaw/fired"] = int(verdict.fired)
        if verdict.fired:
            s.fired += 1
            log.warning(verdict.message)
            s.stopped = self.action(verdict, mixture, self.factor)
            metrics.update({"seesaw/message": verdict.message, "seesaw/stopped": int(s.stopped)})
        return metrics
