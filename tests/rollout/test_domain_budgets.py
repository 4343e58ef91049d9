"""A turn budget per task domain: the config refuses bad budgets, the episode picks the task's
own, and one batch of the hf engine mixing domains stops each sample at its own budget."""

import pytest
from pydantic import ValidationError

from veriloop.core import Task
from veriloop.rollout import EpisodeConfig, StopConfig, rollout
from veriloop.rollout._episode import _start, _turn_budget


def _task(domain: str, index: int = 0) -> Task:
    return Task(id=f"{domain}/{index}", domain=domain, prompt=f"Say {index}.", verifier={"kind": "exact"}, gold="x")


def test_a_turn_gets_its_tasks_domain_budget_and_the_others_the_default(tiny_engine):
    config = EpisodeConfig(max_tokens_per_turn=8, max_tokens_by_domain={"cad": 30})
    for task, expected in ((_task("cad"), 30), (_task("code"), 8)):
        assert config.max_tokens_for(task.domain) == expected
        assert _turn_budget(task, tiny_engine, _start(task, tiny_engine, config), config) == (expected, "max_tokens")
    assert config.largest_turn == 30
    capped = config.model_copy(update={"stop": StopConfig(max_total_tokens=12)})
    cad = _task("cad")
    assert _turn_budget(cad, tiny_engine, _start(cad, tiny_engine, capped), capped) == (12, "max_tokens")


@pytest.mark.parametrize("bad", [0, -3, 2.5, "many", True, None])
def test_a_budget_that_is_not_a_whole_number_of_at_least_one_is_refused(bad):
    with pytest.raises(ValidationError, match=r"is not a token budget; give a whole number >= 1, e.g. \{cad: 400\}"):
        EpisodeConfig(max_tokens_by_domain={"cad": bad})
    with pytest.raises(ValidationError, match="expected a mapping of domain to tokens per turn"):
        EpisodeConfig(max_tokens_by_domain=[("cad", 400)])


def test_the_context_budget_must_leave_room_for_the_largest_turn():
    EpisodeConfig(max_tokens_per_turn=16, context_budget=64)
    with pytest.raises(ValidationError, match=r"must exceed max_tokens_per_turn .* \(largest: 64\)"):
        EpisodeConfig(max_tokens_per_turn=16, max_tokens_by_domain={"cad": 64}, context_budget=64)


def test_one_batch_mixing_two_domains_stops_each_sample_at_its_own_budget(tiny_engine):
    """Budgets 3 and 12 in the same hf batch: no sample passes its own budget, the ones that
    reach it stop with ``max_tokens``, and the 12-token domain's samples go on past 3 tokens."""
    tasks = [_task("short", i) for i in range(3)] + [_task("long", i) for i in range(3)]
    config = EpisodeConfig(
        max_tokens_per_turn=3, max_tokens_by_domain={"long": 12}, stop=StopConfig(repetition_repeats=0)
    )
    batches = []
    original = tiny_engine.sample_rows

    def counting(rows, params, *limits):
        batches.append(sorted(*limits))
        return original(rows, params, *limits)

    tiny_engine.sample_rows = counting
    try:
        trajectories = rollout(tasks, tiny_engine, config, group_size=2, seed=7).trajectories
    finally:
        del tiny_engine.sample_rows
    assert batches == [[3] * 6 + [12] * 6]  # one batch for all twelve episodes
    for trajectory in trajectories:
        budget = {"short": 3, "long": 12}[trajectory.domain]
        [turn] = trajectory.turns
        assert 1 <= turn.generated_tokens <= budget
        if turn.generated_tokens == budget:
            assert trajectory.stop_reason == "max_tokens"
    long_lengths = [t.turns[0].generated_tokens for t in trajectories if t.domain == "long"]
    assert max(long_lengths) > 3 and any(t.stop_reason == "max_tokens" for t in trajectories if t.domain == "short")
