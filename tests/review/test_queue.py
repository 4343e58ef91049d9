"""The review queue: sources read back, strata covered, suspicious samples first, reasons given,
and the same draw for the same seed."""

from __future__ import annotations

from importlib.metadata import version

import pytest

from veriloop.core import UserError
from veriloop.review import SamplerConfig, build_queue, load_sources, suspicion
from veriloop.review._sampler import outcome

from .conftest import SCRIPT_ANSWER, TAMPER_ANSWER

RELEASE = version("veriloop")


def test_eval_runs_come_with_their_tasks_and_checkpoints(review_runs):
    samples = load_sources([review_runs["before"], review_runs["after"]])
    assert len(samples) == 2 * 56
    assert {s.checkpoint for s in samples} == {0, 1}
    first = next(s for s in samples if s.task_id == "extract/2")
    assert first.has_task and first.verifier_kind == "regex" and first.gold == "102"
    assert first.verifier == {"kind": "regex", "pattern": ".*102.*", "mode": "fullmatch"}
    assert first.verifier_version.startswith(f"{RELEASE}+") and len(first.verifier_version) == len(RELEASE) + 13
    assert first.sample_id == "extract/2#0" and first.run == str(review_runs["before"].resolve())


def test_a_trajectory_store_or_its_training_run_gives_episodes(trajectory_store, review_runs):
    by_store = load_sources([trajectory_store])
    by_run = load_sources([trajectory_store.parent], [review_runs["tasks"]])
    assert [s.sample_id for s in by_store] == [s.sample_id for s in by_run] == [f"traj-{n}" for n in range(6)]
    episode = by_store[0]
    assert [t.role for t in episode.turns] == ["assistant", "observation", "assistant"]
    assert episode.turns[0].tool == "python" and episode.checkpoint == 0 and by_store[5].checkpoint == 1
    assert episode.verifier_kind == "unknown" and not episode.has_task  # no task file names tool/0


def test_bad_paths_are_user_errors(tmp_path, review_runs):
    with pytest.raises(UserError, match="no such directory"):
        load_sources([tmp_path / "missing"])
    with pytest.raises(UserError, match="neither an eval run"):
        load_sources([tmp_path])
    with pytest.raises(UserError, match="given twice"):
        load_sources([review_runs["after"], review_runs["after"]])


def test_signals_name_what_is_suspicious(review_runs):
    samples = load_sources([review_runs["before"], review_runs["after"]])
    found = {
        (s.run_label, s.sample_id): dict(signals) for s, signals in zip(samples, suspicion(samples, SamplerConfig()))
    }
    assert "short_high_reward" in found[("step-100", "math/0#1")]
    assert "infra_error" in found[("step-100", "math/0#3")]
    assert "rare_pass" in found[("step-100", "extract/3#0")]  # 1 pass in 8 samples of the task
    assert "tampering" in found[("step-100", "extract/5#3")]
    assert "os._exit (early_exit)" in found[("step-100", "extract/5#3")]["tampering"]
    assert "flipped" in found[("step-100", "math/7#0")]
    assert "fail -> pass since checkpoint step-0" in found[("step-100", "math/7#0")]["flipped"]
    assert found[("step-0", "math/1#0")] == {} and found[("step-100", "math/2#0")] == {}
    assert not any("flipped" in signals for (label, _), signals in found.items() if label == "step-0")


def test_queue_covers_every_stratum_and_puts_suspicion_first(review_runs):
    samples = load_sources([review_runs["before"], review_runs["after"]])
    queue = build_queue(samples, SamplerConfig(size=12, seed=3))
    strata = {(s.domain, s.verifier_kind, outcome(s)) for s in samples}
    assert {(i.sample.domain, i.sample.verifier_kind, outcome(i.sample)) for i in queue} == strata
    assert [i.position for i in queue] == list(range(12))
    assert queue[0].priority == max(i.priority for i in queue) > 0
    for item in queue:
        assert item.reasons[0].startswith(f"stratum {item.stratum} (pick ")
        assert len(item.reasons) == 1 + len(item.signals)
    hedges = [i for i in queue if i.sample.domain == "extraction" and outcome(i.sample) == "passed"]
    assert hedges and all("rare_pass" in i.signals for i in hedges)
    responses = {i.sample.response for i in build_queue(samples, SamplerConfig(size=200))}
    assert {SCRIPT_ANSWER, TAMPER_ANSWER, "x"} <= responses


def test_same_seed_same_queue_other_seed_other_ties(review_runs):
    samples = load_sources([review_runs["before"], review_runs["after"]])
    config = SamplerConfig(size=20, seed=7)
    keys = [i.sample.key for i in build_queue(samples, config)]
    assert keys == [i.sample.key for i in build_queue(list(samples), config)]
    others = [[i.sample.key for i in build_queue(samples, SamplerConfig(size=20, seed=s))] for s in range(1, 6)]
    assert any(other != keys for other in others)


def test_stratify_by_and_per_stratum_are_honoured(review_runs):
    samples = load_sources([review_runs["after"]])
    by_domain = build_queue(samples, SamplerConfig(size=50, stratify_by=("domain",), per_stratum=3))
    assert sorted(i.stratum for i in by_domain) == ["domain=extraction"] * 3 + ["domain=math"] * 3
    unstratified = build_queue(samples, SamplerConfig(size=5, stratify_by=()))
    assert {i.stratum for i in unstratified} == {"all"}
    assert [i.priority for i in unstratified] == sorted((i.priority for i in unstratified), reverse=True)
