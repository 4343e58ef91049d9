"""Context budgets: observations cut in the middle, older ones dropped, or a stop; and training
rows that are exactly the contexts the model saw."""

import pytest
import torch
from pydantic import ValidationError

from veriloop.core import Task
from veriloop.rollout import EpisodeConfig, SandboxTools, StopConfig, rollout
from veriloop.rollout._context import CUT_MARKER, DROPPED_OBSERVATION, truncate_middle
from veriloop.training._batch import completion_logprobs, token_batch

from .conftest import STUBBORN_PROMPT

TURN_TOKENS = 48
TASK = Task(id="div", domain="tools", prompt=STUBBORN_PROMPT, verifier={"kind": "exact"}, gold="x")


def _config(**budget) -> EpisodeConfig:
    return EpisodeConfig(
        temperature=0,
        max_tokens_per_turn=TURN_TOKENS,
        tools=("python",),
        stop=StopConfig(max_turns=6, max_repeated_failures=100, repetition_repeats=0),
        **budget,
    )


def _episode(engine, sandbox, **budget):
    batch = rollout([TASK], engine, _config(**budget), tools=SandboxTools(sandbox))
    return batch.trajectories[0], batch.metrics


@pytest.fixture(scope="module")
def unbounded(scripted_engine, sandbox):
    """The stubborn script's episode without a budget: the model calls failing code every turn."""
    trajectory, _ = _episode(scripted_engine, sandbox)
    assert [t.role for t in trajectory.turns].count("assistant") == 6
    return trajectory


def _check_contexts_are_what_the_model_saw(engine, trajectory):
    """Each generated token is trained once, and its sampler log-prob is its log-prob in its row."""
    contexts = trajectory.contexts()
    generated = sum(len(t.token_ids) for t in trajectory.turns if t.role == "assistant")
    assert sum(sum(c.loss_mask) for c in contexts) == generated
    assert all(c.prompt_ids == trajectory.prompt_ids for c in contexts)  # the prompt stays pinned
    batch = token_batch([trajectory], engine.pad_token_id)
    assert batch.trajectory_index.tolist() == [0] * len(contexts)
    with torch.no_grad():
        for lean in (engine.lean, None):  # both forwards the trainer may use
            recomputed, _ = completion_logprobs(engine.model, batch, temperature=1.0, lean=lean)
            trained = batch.loss_mask.bool()
            assert torch.allclose(recomputed[trained], batch.sampler_logprobs[trained], atol=1e-4)


def test_without_pressure_the_budget_changes_nothing(scripted_engine, sandbox, unbounded):
    roomy = max(unbounded.context_tokens) + TURN_TOKENS + 200
    trajectory, _ = _episode(scripted_engine, sandbox, context_budget=roomy, context_policy="drop_oldest")
    assert trajectory.completion_ids == unbounded.completion_ids and trajectory.segments == ()
    assert trajectory.context_tokens == unbounded.context_tokens and (trajectory.drops, trajectory.truncations) == (
        0,
        0,
    )


def test_stop_ends_the_episode_before_the_context_overflows(scripted_engine, sandbox, unbounded):
    budget = unbounded.context_tokens[1] + TURN_TOKENS - 1  # the first observation does not fit
    trajectory, _ = _episode(scripted_engine, sandbox, context_budget=budget, context_policy="stop")
    assert trajectory.stop_reason == "context_budget"
    assert [t.role for t in trajectory.turns] == ["assistant"]


def test_truncate_cuts_the_observation_in_the_middle(scripted_engine, sandbox, unbounded):
    observation = unbounded.turns[1]
    assert observation.role == "observation" and len(observation.token_ids) > 40
    before = unbounded.context_tokens[1] - len(observation.token_ids)  # the context ahead of it
    budget = before + TURN_TOKENS + (2 * len(observation.token_ids)) // 3
    trajectory, metrics = _episode(scripted_engine, sandbox, context_budget=budget, context_policy="truncate")
    shown = trajectory.turns[1]
    assert "tokens cut ..." in shown.text and len(shown.token_ids) <= budget - TURN_TOKENS - before
    head, tail = shown.text.split("\n[... ")[0], shown.text.split(" tokens cut ...]\n")[1]
    assert observation.text.startswith(head) and observation.text.endswith(tail)
    assert trajectory.truncations >= 1 and metrics.truncations_per_episode == trajectory.truncations
    assert all(n + TURN_TOKENS <= budget for n in trajectory.context_tokens)
    assert trajectory.segments == ()  # the context only grew: one training row
    _check_contexts_are_what_the_model_saw(scripted_engine, trajectory)


@pytest.mark.parametrize("reuse_kv", [True, False])
def test_drop_oldest_keeps_the_prompt_and_trains_each_context_the_model_saw(
    scripted_engine, sandbox, unbounded, reuse_kv
):
    budget = unbounded.context_tokens[3] + TURN_TOKENS  # the fourth observation needs room
    trajectory, metrics = _episode(
        scripted_engine, sandbox, context_budget=budget, context_policy="drop_oldest", reuse_kv=reuse_kv
    )
    assert trajectory.drops >= 1 and len(trajectory.segments) >= 1
    assert metrics.drops_per_episode == trajectory.drops and metrics.context_tokens_max <= budget - TURN_TOKENS
    assert all(n + TURN_TOKENS <= budget for n in trajectory.context_tokens)
    assert len(trajectory.context_tokens) > 4  # dropping made room for more turns
    last = scripted_engine.tokenizer.decode(list(trajectory.completion_ids))
    assert DROPPED_OBSERVATION in last
    assert not any(
        DROPPED_OBSERVATION in scripted_engine.tokenizer.decode(list(s.completion_ids)) for s in trajectory.segments[:1]
    )
    _check_contexts_are_what_the_model_saw(scripted_engine, trajectory)
    assert scripted_engine.sessions.nbytes == 0  # the episode ended its session


def test_a_budget_must_leave_room_for_a_turn():
    with pytest.raises(ValidationError, match="must exceed max_tokens_per_turn"):
        EpisodeConfig(max_tokens_per_turn=64, context_budget=64)


def test_truncate_middle_keeps_head_and_tail(tiny_engine):
    tokenizer = tiny_engine.tokenizer
    text = " ".join(f"line {i}" for i in range(200))
    cut = truncate_middle(tokenizer, text, 40)
    head, tail = cut.split(CUT_MARKER.split("{count}")[0])[0], cut.split(CUT_MARKER.split("{count}")[1])[1]
    assert text.startswith(head) and text.endswith(tail) and head and tail
    removed = int(cut.split("[... ")[1].split(" tokens")[0])
    assert removed == len(tokenizer.encode(text, add_special_tokens=False)) - 40
    assert truncate_middle(tokenizer, "short", 40) == "short"
