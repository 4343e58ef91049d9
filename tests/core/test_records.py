import pytest
from pydantic import ValidationError

from veriloop.core import ExecResult, Registry, Score, Task, Trajectory, Turn, UnknownNameError


def test_task_accepts_plain_and_chat_prompts():
    plain = Task(id="t", domain="d", prompt="hi", verifier={"kind": "exact"}, gold="x")
    chat = Task.model_validate(
        {"id": "c", "domain": "d", "prompt": [{"role": "user", "content": "hi"}], "verifier": {"kind": "exact"}}
    )
    assert plain.messages() == [{"role": "user", "content": "hi"}]
    assert chat.messages() == [{"role": "user", "content": "hi"}]
    assert chat.verifier_kind == "exact"


@pytest.mark.parametrize(
    "change, message",
    [
        ({"verifier": {"pattern": "x"}}, "kind"),
        ({"prompt": []}, "at least one message"),
        ({"id": ""}, "at least 1 character"),
        ({"surprise": 1}, "Extra inputs"),
        ({"difficulty": float("nan")}, "finite"),
    ],
)
def test_task_rejects_bad_records(change, message):
    row = {"id": "t", "domain": "d", "prompt": "p", "verifier": {"kind": "exact"}} | change
    with pytest.raises(ValidationError, match=message):
        Task.model_validate(row)


def test_records_are_frozen():
    task = Task(id="t", domain="d", prompt="p", verifier={"kind": "exact"})
    with pytest.raises(ValidationError):
        task.id = "other"


def test_infra_error_is_never_a_zero_reward():
    Score(id="r", task_id="t", reward=None, status="infra_error")
    with pytest.raises(ValidationError, match="reward None"):
        Score(id="r", task_id="t", reward=0.0, status="infra_error")
    with pytest.raises(ValidationError, match="finite reward"):
        Score(id="r", task_id="t", reward=None, status="scored")


def test_exec_result_status_is_checked():
    assert ExecResult(status="ok", exit_code=0, wall_s=0.1).ok
    with pytest.raises(ValidationError):
        ExecResult(status="exploded", exit_code=0, wall_s=0.1)


def test_trajectory_token_fields_must_align():
    Trajectory(
        id="x",
        task_id="t",
        domain="d",
        group_id="g",
        completion_ids=(1, 2, 3),
        logprobs=(-0.1, 0.0, -0.2),
        loss_mask=(1, 0, 1),
        turns=(Turn(role="assistant", text="a", token_ids=(1,), logprobs=(-0.1,)),),
    )
    with pytest.raises(ValidationError, match="same length"):
        Trajectory(id="x", task_id="t", domain="d", group_id="g", completion_ids=(1, 2), loss_mask=(1,))
    with pytest.raises(ValidationError, match="only 0 and 1"):
        Trajectory(id="x", task_id="t", domain="d", group_id="g", completion_ids=(1,), loss_mask=(2,))


def test_registry_names_known_entries_on_a_miss():
    registry: Registry[int] = Registry("widget")
    registry.add("b", 2)
    registry.add("a", 1)
    assert registry.get("a") == 1 and registry.names() == ["a", "b"]
    with pytest.raises(UnknownNameError, match="unknown widget 'c'; known: a, b"):
        registry.get("c")
    with pytest.raises(ValueError, match="already registered"):
        registry.add("a", 3)
