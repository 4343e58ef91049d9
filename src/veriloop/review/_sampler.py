"""The review queue: a seeded, stratified draw of samples, suspicious ones first.

Samples are grouped into strata by the keys of ``SamplerConfig.stratify_by`` (domain, verifier
kind, outcome: passed / failed / infra error), so a queue of 40 covers every kind of verdict
instead of 40 passes of the biggest domain. Within a stratum each sample's priority is the sum of
the weights of the suspicion signals it raises:

- ``short_high_reward``: passed with an answer far shorter than the domain's typical passing one;
- ``rare_pass``: passed a task that most of its samples fail;
- ``tampering``: the answer carries a tampering signature of the audit's exploit catalogue;
- ``flipped``: the task's verdict flipped between this checkpoint and the one before;
- ``infra_error``: the grader broke on it.

Strata take turns, each giving its highest-priority sample next (ties broken by a seeded
shuffle), until the queue is full or ``per_stratum`` is reached everywhere. The same samples,
config and seed give the same queue. Every pick says why it was picked.
"""

from __future__ import annotations

import random
import statistics
from collections import defaultdict
from collections.abc import Sequence
from typing import Literal

from pydantic import Field

from veriloop.core import Record
from veriloop.review._sources import ReviewSample
from veriloop.verifiers import tampering_signs

StratumKey = Literal["domain", "verifier_kind", "outcome"]


class SamplerConfig(Record):
    """How the review queue is drawn."""

    size: int = Field(default=50, ge=1, description="samples in the queue")
    seed: int = Field(default=0, description="seed of the tie-breaking shuffle")
    stratify_by: tuple[StratumKey, ...] = Field(
        default=("domain", "verifier_kind", "outcome"), description="keys that split samples into strata"
    )
    per_stratum: int | None = Field(default=None, ge=1, description="most samples taken from one stratum")
    short_answer_ratio: float = Field(
        default=0.2, gt=0, lt=1, description="short_high_reward: shorter than this share of the domain's median pass"
    )
    hard_task_pass_rate: float = Field(
        default=0.25, ge=0, lt=1, description="rare_pass: a task whose samples pass at most this often"
    )
    min_task_samples: int = Field(
        default=4, ge=2, description="rare_pass: samples a task needs before it is judged hard"
    )
    weights: dict[str, float] = Field(
        default_factory=lambda: {
            "tampering": 4.0,
            "short_high_reward": 3.0,
            "rare_pass": 3.0,
            "flipped": 2.0,
            "infra_error": 2.0,
        },
        description="priority each suspicion signal adds",
    )


class QueueItem(Record):
    """One pick of the queue: the sample, its stratum, its priority and the reasons."""

    position: int
    sample: ReviewSample
    stratum: str
    priority: float
    signals: tuple[str, ...]
    reasons: tuple[str, ...]


def outcome(sample: ReviewSample) -> str:
    if sample.status == "infra_error":
        return "infra_error"
    return "passed" if sample.passed else "failed"


def _median_pass_lengths(samples: Sequence[ReviewSample]) -> dict[str, float]:
    lengths: dict[str, list[int]] = defaultdict(list)
    for sample in samples:
        if outcome(sample) == "passed":
            lengths[sample.domain].append(len(sample.response.strip()))
    return {domain: statistics.median(values) for domain, values in lengths.items()}


def _task_rates(samples: Sequence[ReviewSample]) -> dict[str, tuple[int, int]]:
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for sample in samples:
        if sample.status == "scored":
            counts[sample.task_id][0] += 1
            counts[sample.task_id][1] += int(sample.passed)
    return {task_id: (n, c) for task_id, (n, c) in counts.items()}


def _flips(samples: Sequence[ReviewSample]) -> dict[tuple[str, int], str]:
    """``(task_id, checkpoint) -> reason`` for each task whose majority verdict differs from the
    checkpoint before it (checkpoints in order, per task)."""
    votes: dict[str, dict[int, list[bool]]] = defaultdict(lambda: defaultdict(list))
    labels: dict[int, str] = {}
    for sample in samples:
        if sample.status == "scored":
            votes[sample.task_id][sample.checkpoint].append(sample.passed)
            labels.setdefault(sample.checkpoint, sample.run_label)
    flips = {}
    for task_id, by_checkpoint in votes.items():
        ordered = sorted(by_checkpoint)
        for before, after in zip(ordered, ordered[1:]):
            was = sum(by_checkpoint[before]) * 2 >= len(by_checkpoint[before])
            now = sum(by_checkpoint[after]) * 2 >= len(by_checkpoint[after])
            if was != now:
                arrow = "fail -> pass" if now else "pass -> fail"
                flips[(task_id, after)] = f"flipped {arrow} since checkpoint {labels[before]}"
    return flips


def suspicion(samples: Sequence[ReviewSample], config: SamplerConfig) -> list[list[tuple[str, str]]]:
    """For each sample, its ``(signal, reason)`` pairs (see the module docstring)."""
    medians = _median_pass_lengths(samples)
    rates = _task_rates(samples)
    flips = _flips(samples)
    found = []
    for sample in samples:
        signals: list[tuple[str, str]] = []
        length = len(sample.response.strip())
        median = medians.get(sample.domain, 0.0)
        if outcome(sample) == "passed" and length < config.short_answer_ratio * median:
            signals.append(
                (
                    "short_high_reward",
                    f"passed with a {length}-character answer (median pass in {sample.domain}: {median:g})",
                )
            )
        scored, passes = rates.get(sample.task_id, (0, 0))
        if (
            outcome(sample) == "passed"
            and scored >= config.min_task_samples
            and passes / scored <= config.hard_task_pass_rate
        ):
            signals.append(("rare_pass", f"passed a task that {scored - passes} of its {scored} samples fail"))
        signs = tampering_signs(sample.response)
        if signs:
            names = ", ".join(f"{s.name} ({s.category})" for s in signs[:4])
            signals.append(("tampering", f"tampering patterns from the exploit catalogue: {names}"))
        if (sample.task_id, sample.checkpoint) in flips:
            signals.append(("flipped", flips[(sample.task_id, sample.checkpoint)]))
        if sample.status == "infra_error":
            signals.append(("infra_error", f"the grader broke: {sample.detail[:120]}"))
        found.append(signals)
    return found


def _stratum(sample: ReviewSample, keys: Sequence[str]) -> str:
    values = {"domain": sample.domain, "verifier_kind": sample.verifier_kind, "outcome": outcome(sample)}
    return ", ".join(f"{key}={values[key]}" for key in keys) or "all"


def build_queue(samples: Sequence[ReviewSample], config: SamplerConfig | None = None) -> list[QueueItem]:
    """The review queue over ``samples`` (see the module docstring)."""
    config = config or SamplerConfig()
    signals = suspicion(samples, config)
    rng = random.Random(config.seed)
    strata: dict[str, list[tuple[float, float, int]]] = defaultdict(list)
    for index, sample in enumerate(samples):
        priority = sum(config.weights.get(name, 0.0) for name, _ in signals[index])
        strata[_stratum(sample, config.stratify_by)].append((-priority, rng.random(), index))
    for entries in strata.values():
        entries.sort()
    names = sorted(strata)
    rng.shuffle(names)
    names.sort(key=lambda name: strata[name][0][:2])  # the stratum holding the most suspicious sample goes first
    queue: list[QueueItem] = []
    depth = 0
    limit = config.per_stratum or max(len(entries) for entries in strata.values())
    while len(queue) < config.size and depth < limit:
        for name in names:
            if depth >= len(strata[name]) or len(queue) >= config.size:
                continue
            negative, _, index = strata[name][depth]
            reasons = [f"stratum {name} (pick {depth + 1} of {len(strata[name])})"]
            reasons += [reason for _, reason in signals[index]]
            queue.append(
                QueueItem(
                    position=len(queue),
                    sample=samples[index],
                    stratum=name,
                    priority=-negative,
                    signals=tuple(signal for signal, _ in signals[index]),
                    reasons=tuple(reasons),
                )
            )
        depth += 1
    return queue
