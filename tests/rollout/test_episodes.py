from veriloop.core import Task
from veriloop.rollout import EpisodeConfig, StopConfig, rollout

FEEDBACK = "Expected a different answer; got '3'."  # what the exact verifier says to the answer 3


def _check_alignment(engine, trajectory):
    """Token ids, masks and logprobs line up with the turns and with the rendered conversation."""
    from veriloop.rollout import conversation

    offset = 0
    for turn in trajectory.turns:
        span = slice(offset, offset + len(turn.token_ids))
        assert trajectory.completion_ids[span] == turn.token_ids
        assert set(trajectory.loss_mask[span]) <= ({1} if turn.role == "assistant" else {0})
        if turn.role == "assistant" and turn.logprobs:
            assert trajectory.logprobs[span] == turn.logprobs
        offset += len(turn.token_ids)
    assert offset == len(trajectory.completion_ids)
    tokenizer = engine.tokenizer
    decoded = tokenizer.decode(list(trajectory.prompt_ids + trajectory.completion_ids), skip_special_tokens=False)
    rendered = tokenizer.apply_chat_template(conversation(trajectory), tokenize=False)
    assert rendered.startswith(decoded)
    assert len(rendered) - len(decoded) <= len(tokenizer.eos_token + "\n")


def test_single_turn_batch(tiny_engine):
    tasks = [
        Task(id=f"t{i}", domain="arith", prompt=f"What is {i}+1?", verifier={"kind": "exact"}, gold=str(i + 1))
        for i in range(4)
    ]
    batch = rollout(tasks, tiny_engine, EpisodeConfig(max_tokens_per_turn=10), group_size=3, seed=5)
    assert len(batch.trajectories) == 12
    assert [t.task_id for t in batch.trajectories] == [f"t{i}" for i in range(4) for _ in range(3)]
    for trajectory in batch.trajectories:
        assert len(trajectory.turns) == 1 and trajectory.score is not None and trajectory.reward is not None
        assert trajectory.stop_reason in ("done", "max_tokens", "repetition")
        _check_alignment(tiny_engine, trajectory)
    assert batch.metrics.episodes == 12 and batch.metrics.generated_tokens > 0
    assert sum(batch.metrics.stop_reasons.values()) == 12


def test_multi_turn_with_verifier_feedback(scripted_engine):
    task = Task(id="add", domain="arith", prompt="What is 2+2?", verifier={"kind": "exact"}, gold="4")
    config = EpisodeConfig(
        temperature=0, max_tokens_per_turn=48, tools=("submit",), feedback_on_fail=True, stop=StopConfig(max_turns=3)
    )
    [trajectory] = rollout([task], scripted_engine, config).trajectories
    assert [t.role for t in trajectory.turns] == ["assistant", "observation", "assistant"]
    assert trajectory.turns[1].text == FEEDBACK
    assert trajectory.response == "4" and trajectory.reward == 1.0 and trajectory.stop_reason == "done"
    _check_alignment(scripted_engine, trajectory)


def test_a_stopped_trajectory_carries_its_reason(scripted_engine, tiny_engine):
    task = Task(id="add", domain="arith", prompt="What is 2+2?", verifier={"kind": "exact"}, gold="4")
    base = EpisodeConfig(temperature=0, max_tokens_per_turn=48, tools=("submit",), feedback_on_fail=True)
    one_turn = rollout([task], scripted_engine, base.model_copy(update={"stop": StopConfig(max_turns=1)})).trajectories[
        0
    ]
    assert one_turn.stop_reason == "max_turns" and one_turn.reward == 0.0
    stopped = rollout(
        [task],
        scripted_engine,
        base.model_copy(update={"stop": StopConfig(max_turns=3)}),
        predicate=lambda view: "first failure" if view["last_failed"] else None,
    ).trajectories[0]
    assert stopped.stop_reason == "predicate" and len(stopped.turns) == 1
    budget = rollout(
        [task],
        tiny_engine,
        EpisodeConfig(max_tokens_per_turn=50, stop=StopConfig(max_total_tokens=5, repetition_repeats=0)),
    ).trajectories[0]
    assert budget.stop_reason == "max_tokens" and len(budget.completion_ids) <= 5


async def test_verification_threads_follow_the_code_sandbox_workers():
    """More code workers than verification threads would leave sandbox workers idle."""
    import asyncio
    import threading

    from veriloop.core import Response, Task
    from veriloop.rollout import _episode
    from veriloop.verifiers import code_workers, set_code_workers

    task = Task(id="t", domain="d", prompt="p", verifier={"kind": "exact", "answer": "4"})
    before = code_workers()
    try:
        set_code_workers(12)
        score = await _episode.verify_in_thread(task, Response(id="r", task_id="t", response="4"))
        assert score.passed
        # Twelve verifications can be in flight at once: twelve threads meet at a barrier.
        barrier = threading.Barrier(12, timeout=10)
        loop = asyncio.get_running_loop()
        await asyncio.gather(*(loop.run_in_executor(_episode._VERIFY_THREADS, barrier.wait) for _ in range(12)))
    finally:
        set_code_workers(before)
