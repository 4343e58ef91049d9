from collections import Counter

import pytest

from veriloop.core import Score, Trajectory
from veriloop.scheduling import Curriculum, DomainSchedule, ScheduleConfig

from .conftest import make_tasks

GROUP = 8
PLANTED_PASSES = {"skill/0": GROUP, "skill/1": 0}  # always solved, never solved; the rest: 3 of 8


def group_of(task, step: int) -> list[Trajectory]:
    passes = PLANTED_PASSES.get(task.id, 3)
    return [
        Trajectory(
            id=f"{task.id}#{step}/{j}",
            task_id=task.id,
            domain=task.domain,
            group_id=f"{task.id}#{step}",
            sample_index=j,
            reward=float(j < passes),
            score=Score(id=f"{j}", task_id=task.id, reward=float(j < passes), passed=j < passes),
        )
        for j in range(GROUP)
    ]


def test_an_always_solved_task_leaves_the_learnable_band_and_retires():
    tasks = make_tasks("skill", 6)
    config = ScheduleConfig(curriculum=True, curriculum_retry_every=4, curriculum_retire_after=2)
    schedule = DomainSchedule(tasks, config, seed=0)
    drawn: Counter[str] = Counter()
    buckets_seen = []
    for step in range(30):
        batch = schedule.next(2)
        drawn.update(t.id for t in batch)
        schedule.observe([t for task in batch for t in group_of(task, step)])
        buckets_seen.append(schedule.curriculum.bucket("skill/0"))
        metrics = schedule.step_metrics([group_of(task, step) for task in batch])
    curriculum = schedule.curriculum
    assert buckets_seen[0] in ("unseen", "too_easy") and "too_easy" in buckets_seen
    assert "learnable" not in buckets_seen
    assert curriculum.bucket("skill/0") == "retired" and curriculum.state.retired == ["skill/0"]
    assert drawn["skill/0"] == 2  # seen once, retried once, then never drawn again
    assert curriculum.bucket("skill/1") == "too_hard"
    assert all(curriculum.bucket(f"skill/{i}") == "learnable" for i in range(2, 6))
    assert min(drawn[f"skill/{i}"] for i in range(2, 6)) > 2 * drawn["skill/1"]  # the band is favoured
    assert drawn["skill/1"] >= 3  # but the too-hard task is still retried now and then
    assert metrics["domain/skill/retired"] == 1 and metrics["curriculum/retired"] == 1
    assert metrics["domain/skill/learnable"] == 4 and metrics["domain/skill/too_hard"] == 1


def test_pass_rate_estimate_is_smoothed_and_bucketed():
    curriculum = Curriculum(low=0.2, high=0.8, smoothing=0.5, retire_after=0)
    assert curriculum.bucket("t") == "unseen"
    curriculum.observe("t", 8, 8)
    assert curriculum.bucket("t") == "too_easy"
    curriculum.observe("t", 0, 8)
    assert curriculum.state.rates["t"] == pytest.approx(0.5) and curriculum.bucket("t") == "learnable"
    curriculum.observe("t", 0, 8)
    curriculum.observe("t", 0, 8)
    assert curriculum.bucket("t") == "too_hard"
    for _ in range(5):
        curriculum.observe("t", 8, 8)
    assert curriculum.bucket("t") == "too_easy" and not curriculum.state.retired  # retire_after=0: never
    assert curriculum.counts(["t", "u"]) == {"unseen": 1, "too_hard": 0, "learnable": 0, "too_easy": 1, "retired": 0}


def test_a_domain_with_every_task_retired_leaves_the_mixture():
    tasks = make_tasks("done", 2) + make_tasks("open", 3)
    schedule = DomainSchedule(tasks, ScheduleConfig(curriculum=True, curriculum_retire_after=1), seed=0)
    for task in tasks[:2]:
        schedule.curriculum.observe(task.id, GROUP, GROUP)
    assert {t.domain for t in schedule.next(10)} == {"open"}
