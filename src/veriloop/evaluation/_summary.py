"""From per-sample rows to the figures of ``summary.json``.

Infra errors (a grader or a server that broke) are set aside: they are counted, never
scored as failures, and a task's pass@k is computed over its scored samples only.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from veriloop.core import Task
from veriloop.evaluation._passk import mean_pass_at_k, pass_rate_interval
from veriloop.evaluation._samples import EvalSample, task_counts


def task_set_hash(tasks: Iterable[Task]) -> str:
    """A short content hash of a task set that ignores task order."""
    digests = sorted(
        hashlib.sha256(json.dumps(task.model_dump(mode="json"), sort_keys=True).encode()).hexdigest() for task in tasks
    )
    return hashlib.sha256("\n".join(digests).encode()).hexdigest()[:16]


def _round(value: float) -> float:
    return round(value, 6)


def score_block(samples: Sequence[EvalSample], max_k: int, confidence: float = 0.95) -> dict[str, Any]:
    """pass@1 with its interval, pass@k for every k <= max_k, mean reward and infra errors."""
    counts = list(task_counts(samples).values())
    scored = [s for s in samples if s.status == "scored"]
    pass_at = {k: mean_pass_at_k(counts, k) for k in range(1, max_k + 1)}
    low, high = pass_rate_interval(counts, confidence)
    return {
        "tasks": len(counts),
        "samples": len(samples),
        "scored_samples": len(scored),
        "pass@1": None if pass_at[1] is None else _round(pass_at[1]),  # None: no sample was scored
        "pass@1_ci": [_round(low), _round(high)],
        "pass@k": {str(k): _round(v) for k, v in pass_at.items() if v is not None},
        "mean_reward": _round(sum(s.reward for s in scored) / len(scored)) if scored else None,
        "infra_errors": len(samples) - len(scored),
    }


def _context_block(samples: Sequence[EvalSample]) -> dict[str, Any]:
    """Tokens in the model's context at the start of its turns (mean over turns, max), and the
    context budget's truncations and drops per episode."""
    turns = sum(s.turns for s in samples if s.context_tokens_sum)
    episodes = max(len(samples), 1)
    return {
        "tokens_mean_per_turn": _round(sum(s.context_tokens_sum for s in samples) / turns) if turns else 0.0,
        "tokens_max": max((s.context_tokens_max for s in samples), default=0),
        "truncations_per_episode": _round(sum(s.truncations for s in samples) / episodes),
        "drops_per_episode": _round(sum(s.drops for s in samples) / episodes),
    }


def summarize(samples: Sequence[EvalSample], max_k: int, confidence: float = 0.95) -> dict[str, Any]:
    """The figures of a run: totals, per-domain blocks, infra errors, tokens and times."""
    by_domain: dict[str, list[EvalSample]] = {}
    for sample in samples:
        by_domain.setdefault(sample.domain, []).append(sample)
    infra = [s for s in samples if s.status == "infra_error"]
    walls = {s.chunk: s.chunk_wall_s for s in samples}
    tokens = sum(s.completion_tokens for s in samples)
    return {
        **score_block(samples, max_k, confidence),
        "confidence": confidence,
        "domains": {domain: score_block(rows, max_k, confidence) for domain, rows in sorted(by_domain.items())},
        "infra_error_tasks": len({s.task_id for s in infra}),
        "infra_error_details": dict(Counter(s.detail[:160] for s in infra).most_common(5)),
        "stop_reasons": dict(Counter(s.stop_reason for s in samples)),
        "context": _context_block(samples),
        "tokens": {
            "completion": tokens,
            "mean_per_sample": _round(tokens / len(samples)) if samples else 0.0,
        },
        "time": {
            "wall_s": _round(sum(walls.values())),
            "generate_s": _round(sum(s.generate_s for s in samples)),
            "verify_s": _round(sum(s.verify_s for s in samples)),
        },
    }
