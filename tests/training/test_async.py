"""The asynchronous pipeline: staleness bounds, equivalence with sync, exactly-once accounting."""

import signal
import subprocess
import sys
import time

import pytest
import torch

from veriloop.rollout import TrajectoryStore
from veriloop.training import RLTrainer, TaskSampler, ledger_summary, read_events, read_ledger, read_metrics

pytestmark = pytest.mark.e2e


def _run(make_config, tasks, name, **pipeline):
    trainer = RLTrainer(make_config(name=name, run={"steps": 4}, pipeline=pipeline), tasks=tasks)
    history = trainer.train()
    return trainer, history


@pytest.mark.determinism
def test_staleness_0_reproduces_the_synchronous_run(make_config, digit_tasks):
    """Bit for bit: staleness 0 is the synchronous algorithm, the same operations on the same data in
    the same order; any difference is a bug in the pipeline, not rounding."""
    sync, sync_history = _run(make_config, digit_tasks, "sync")
    same, async_history = _run(make_config, digit_tasks, "async0", mode="async", max_staleness=0)
    for a, b in zip(sync_history, async_history, strict=True):
        assert a["reward/sampled_mean"] == b["reward/sampled_mean"]
        assert a["policy_loss"] == b["policy_loss"]
        assert b["staleness/max"] == 0
    sync_weights, async_weights = sync.model.state_dict(), same.model.state_dict()
    assert all(torch.equal(sync_weights[k], async_weights[k]) for k in sync_weights)
    first = [t.completion_ids for t in TrajectoryStore(sync.out / "trajectories")]
    second = [t.completion_ids for t in TrajectoryStore(same.out / "trajectories")]
    assert first == second


@pytest.fixture(scope="module")
def one_version_behind(make_config_in, new_digit_tasks, tmp_path_factory):
    """A 4-step async run at most one version behind, stale tokens corrected against the sampler's
    policy (``behaviour``), with a stall threshold far below an update's length (so every update is
    reported as a stall): ``(trainer, history)``."""
    make_config = make_config_in(tmp_path_factory.mktemp("async"))
    return _run(make_config, new_digit_tasks(), "async1", mode="async", max_staleness=1, stall_after_s=0.005)


def test_trajectories_never_exceed_the_staleness_bound(make_config, digit_tasks, one_version_behind):
    decoupled = _run(make_config, digit_tasks, "async2", mode="async", max_staleness=2, stale_correction="decoupled")
    for bound, correction, (trainer, history) in ((1, "behaviour", one_version_behind), (2, "decoupled", decoupled)):
        assert trainer.config.pipeline.stale_correction == correction
        # decoupled, from before algorithm.correction, is its token_tis capped at is_cap
        expected = ("token_tis", 2.0) if correction == "decoupled" else ("none", 2.0)
        assert (trainer.config.algorithm.correction.mode, trainer.config.algorithm.correction.cap) == expected
        assert len(history) == 4
        for step, metrics in enumerate(history, start=1):
            assert metrics["staleness/max"] <= bound
            assert metrics["util/queue_depth"] <= bound + 1
            assert metrics["policy_version"] == step
            if metrics["staleness/max"] > 0:  # staleness is a mismatch between the sampler's policy and the trainer's
                assert metrics["mismatch/abs_logprob_diff_mean"] > 0
            if metrics["staleness/max"] > 0 and correction == "decoupled":  # reweighted against the current policy
                assert 0 < metrics["mismatch/weight_mean"] <= trainer.config.pipeline.is_cap
            if correction == "behaviour":  # the ratio is against the sampler's policy: measured, not reweighted
                assert metrics["mismatch/weight_mean"] == 1.0
        # Every stored trajectory trained at step k was sampled by version >= k - 1 - bound.
        stored = list(TrajectoryStore(trainer.out / "trajectories"))
        per_step = len(stored) // 4
        for index, trajectory in enumerate(stored):
            step = index // per_step + 1
            assert step - 1 - bound <= trajectory.policy_version <= step - 1
        assert any(m["staleness/max"] > 0 for m in history) or bound == 0


def test_utilisation_metrics_are_logged(one_version_behind):
    trainer, _ = one_version_behind
    stalls = read_events(trainer.out)
    assert any(
        e["phase"] == "train" and e["doing"].startswith("step ") and "update on 32 sequences" in e["doing"]
        for e in stalls
    ), stalls
    records = [r for r in read_metrics(trainer.out) if "util/trainer_busy_s" in r]
    assert len(records) == 4
    for record in records:
        for key in (
            "util/trainer_busy_s",
            "util/trainer_wait_s",
            "util/generator_busy_s",
            "util/generator_wait_s",
            "util/engine_busy_s",
            "util/inference_to_training",
            "util/trainer_busy_fraction",
            "util/generator_busy_fraction",
            "util/queue_depth",
            "util/sandbox_busy_fraction",
            "util/verify_busy_s",
        ):
            assert key in record and record[key] >= 0, key
        assert record["util/engine_busy_s"] > 0
        assert 0 < record["util/generator_busy_fraction"] <= 1


@pytest.mark.determinism
def test_kill_and_resume_keeps_exactly_once_accounting(tmp_path, config_file, digit_tasks):
    path = config_file(
        rollout={"prompts_per_step": 3},
        algorithm={"max_refills": 1},
        optim={"warmup_steps": 1},
        pipeline={"mode": "async", "max_staleness": 2},
        run={"steps": 4, "checkpoint_every": 2},
    )
    out = tmp_path / "run"
    veriloop = [sys.executable, "-m", "veriloop.cli._entry", "train", str(path), f"run.out={out}"]
    process = subprocess.Popen(veriloop, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    # Kill after a checkpoint, with later steps trained (and more batches sampled ahead).
    while len(read_metrics(out)) < 3 and time.time() < deadline and process.poll() is None:
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    assert process.wait() == -signal.SIGKILL, "the run ended before it could be killed"
    assert (out / "checkpoints" / "step-00000002").exists()
    resumed = subprocess.run(veriloop, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr

    ledger = read_ledger(out)
    summary = ledger_summary(ledger)
    assert summary["exactly_once"], [r["draw"] for r in ledger]
    # The draws are the sampler's sequence, none skipped or repeated across the kill.
    expected = [t.id for t in TaskSampler(digit_tasks, 0).next(len(ledger))]
    assert [r["task_id"] for r in ledger] == expected
    assert [r["step"] for r in read_metrics(out) if "util/trainer_busy_s" in r] == [1, 2, 3, 4]
    assert sorted({r["step"] for r in ledger}) == [1, 2, 3, 4]
    for step in range(1, 5):
        trained = [r for r in ledger if r["step"] == step and r["outcome"] == "trained"]
        assert len(trained) <= 3
    assert all(r["outcome"] == "trained" or r["reason"] in ("no_signal", "infra_error") for r in ledger)


def test_steps_without_an_update_do_not_stall_the_producer(make_config):
    """Every group has no signal: no step updates, and the pipeline still runs to the end."""
    from veriloop.core import Task

    impossible = [
        Task(id=f"x{i}", domain="none", prompt=f"Say {i}.", verifier={"kind": "regex", "pattern": "^never-[0-9]{40}$"})
        for i in range(8)
    ]
    trainer = RLTrainer(
        make_config(
            name="skips",
            run={"steps": 3},
            algorithm={"max_refills": 0},
            pipeline={"mode": "async", "max_staleness": 1, "stall_after_s": 60},
        ),
        tasks=impossible,
    )
    history = trainer.train()
    assert [m.get("skipped") for m in history] == [1, 1, 1]
    ledger = read_ledger(trainer.out)
    assert ledger_summary(ledger) == {"draws": 12, "trained": 0, "dropped": {"no_signal": 12}, "exactly_once": True}


def test_stale_tokens_ratio_is_truncated_at_is_cap(make_config, digit_tasks):
    """behaviour correction: a stale token far more likely now than when sampled counts at most is_cap."""
    from veriloop.training._batch import token_batch
    from veriloop.training._objective import LossInputs

    trainer = RLTrainer(
        make_config(name="cap", rollout={"prompts_per_step": 1}, pipeline={"mode": "async", "is_cap": 2.0}),
        tasks=digit_tasks,
    )
    batch = token_batch([t for g in trainer._sample_groups(1).groups for t in g], trainer.engine.pad_token_id)
    old = batch.sampler_logprobs - 5.0  # ratio e^5 on every token
    advantages = -torch.ones(len(batch))
    # Each call also steps the optimizer; one small step leaves every ratio far above is_cap.
    fresh = trainer._update(LossInputs(batch, old, advantages, stale=False))
    stale = trainer._update(LossInputs(batch, old, advantages, stale=True))
    assert fresh["policy_loss"] > 100  # -A * r, unbounded
    assert abs(stale["policy_loss"] - 2.0) < 1e-3  # -A * is_cap


def test_partial_rollouts_keep_token_versions_ordered_and_within_the_bound(make_config, digit_tasks):
    """Weights land mid-batch (when the update beats the generation; timing decides how often):
    every trajectory's tokens carry non-decreasing versions, its own version is its oldest token's,
    and no token is more than max_staleness versions behind the trainer that trains on it."""
    trainer, history = _run(make_config, digit_tasks, "partial", mode="async", max_staleness=1, partial_rollouts=True)
    assert len(history) == 4
    for metrics in history:
        assert metrics["staleness/max"] <= 1 and metrics["staleness/token_mean"] <= 1
        assert 0 <= metrics["staleness/straddling"] <= 1
    trajectories = list(TrajectoryStore(trainer.out / "trajectories"))
    assert trajectories
    for trajectory in trajectories:
        versions = [v for v, m in zip(trajectory.token_versions, trajectory.loss_mask) if m]
        assert versions == sorted(versions) and versions[0] == trajectory.policy_version
    assert trainer.backend.engine.midway_weights is None  # released with the pipeline
