import random

import pytest

from veriloop.core import UserError
from veriloop.evaluation import EvalSample
from veriloop.scheduling import SEESAW_ACTIONS, SeesawMonitor, TaskMixture, judge_seesaw, mixture_weights

from .conftest import make_tasks

TASKS, SAMPLES = 30, 8


def eval_samples(rates: dict[str, list[float]], seed: int) -> list[EvalSample]:
    """SAMPLES samples of every task; task i of a domain passes with probability rates[domain][i]."""
    rng = random.Random(seed)
    return [
        EvalSample(task_id=f"{domain}/{i}", domain=domain, sample_index=j, reward=float(passed), passed=passed)
        for domain, per_task in rates.items()
        for i, rate in enumerate(per_task)
        for j in range(SAMPLES)
        for passed in [rng.random() < rate]
    ]


def task_rates(seed: int) -> list[float]:
    rng = random.Random(seed)
    return [rng.uniform(0.1, 0.9) for _ in range(TASKS)]


def test_fires_on_a_planted_regression():
    math, code = task_rates(1), task_rates(2)
    baseline = eval_samples({"math": math, "code": code}, seed=10)
    current = eval_samples(
        {"math": [min(r + 0.3, 1.0) for r in math], "code": [max(r - 0.3, 0.0) for r in code]}, seed=11
    )
    verdict = judge_seesaw(baseline, current, step=40)
    assert verdict.fired and verdict.rising == ("math",) and verdict.falling == ("code",)
    assert verdict.deltas["code"] < -0.2 < 0.2 < verdict.deltas["math"]
    assert verdict.message.startswith("seesaw at step 40: code fell while math rose")


@pytest.mark.parametrize("seed", range(6))
def test_stays_quiet_on_noise(seed):
    rates = {"math": task_rates(seed), "code": task_rates(seed + 100), "tables": task_rates(seed + 200)}
    verdict = judge_seesaw(eval_samples(rates, seed=1000 + seed), eval_samples(rates, seed=2000 + seed))
    assert not verdict.fired, verdict


def test_a_drop_alone_is_not_a_seesaw():
    math, code = task_rates(3), task_rates(4)
    baseline = eval_samples({"math": math, "code": code}, seed=1)
    current = eval_samples({"math": math, "code": [max(r - 0.4, 0.0) for r in code]}, seed=2)
    verdict = judge_seesaw(baseline, current)
    assert not verdict.fired and verdict.falling == ("code",) and verdict.rising == ()


def test_actions_reweight_the_rising_domain_or_stop():
    math, code = task_rates(1), task_rates(2)
    verdict = judge_seesaw(
        eval_samples({"math": math, "code": code}, seed=10),
        eval_samples({"math": [min(r + 0.3, 1.0) for r in math], "code": [max(r - 0.3, 0.0) for r in code]}, seed=11),
    )
    tasks = make_tasks("math", 5) + make_tasks("code", 5)
    mixture = TaskMixture(tasks, mixture_weights("fixed", {"math": 5, "code": 5}), seed=0)
    assert SEESAW_ACTIONS.get("warn")(verdict, mixture, 0.5) is False
    assert SEESAW_ACTIONS.get("reweight")(verdict, mixture, 0.5) is False
    assert mixture.state.weights == pytest.approx({"math": 1 / 3, "code": 2 / 3})
    assert SEESAW_ACTIONS.get("stop")(verdict, mixture, 0.5) is True


def test_checks_need_heldout_tasks(tmp_path):
    with pytest.raises(UserError, match="needs held-out tasks"):
        SeesawMonitor([], tmp_path, every=5)
    monitor = SeesawMonitor(make_tasks("math", 2), tmp_path, every=5)
    assert monitor.due(0) and not monitor.due(-1)
    monitor.state.baseline_step, monitor.state.last_step = 0, 0
    assert [step for step in range(1, 16) if monitor.due(step)] == [5, 10, 15]
