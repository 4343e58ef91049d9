import asyncio

import pytest

from veriloop.core import Task
from veriloop.rollout import Action, EpisodeConfig, SandboxTools, StopConfig, rollout

pytestmark = pytest.mark.e2e


def test_workspace_persists_across_tool_calls(sandbox):
    tools = SandboxTools(sandbox)

    async def episode():
        first = await tools.execute(Action("python", "open('notes.txt', 'w').write('kept')\nprint(6 * 7)"), None)
        second = await tools.execute(Action("shell", "cat notes.txt"), first.workspace)
        third = await tools.execute(Action("python", "import sys; sys.exit(3)"), second.workspace)
        return first, second, third

    first, second, third = asyncio.run(episode())
    assert first.text == "42\n" and not first.failed
    assert second.text == "kept\n" and not second.failed
    assert third.failed and "[exit code 3]" in third.text


def test_model_calls_python_then_submits(scripted_engine, sandbox):
    """The fine-tuned tiny model runs code in the sandbox, reads the output and submits it."""
    task = Task(id="mul", domain="tools", prompt="Use Python to compute 6*7.", verifier={"kind": "exact"}, gold="42")
    config = EpisodeConfig(
        temperature=0, max_tokens_per_turn=48, tools=("python", "submit"), stop=StopConfig(max_turns=3)
    )
    batch = rollout([task], scripted_engine, config, tools=SandboxTools(sandbox), sandbox_workers=2)
    [trajectory] = batch.trajectories
    assert [t.role for t in trajectory.turns] == ["assistant", "observation", "assistant"]
    assert trajectory.turns[0].tool == "python" and trajectory.turns[1].text == "42\n"
    assert trajectory.response == "42" and trajectory.reward == 1.0 and trajectory.stop_reason == "done"
    assert trajectory.timings["tools_s"] > 0
    assert batch.metrics.tools_busy_s > 0 and 0 < batch.metrics.sandbox_busy_fraction <= 1


def test_the_same_failing_action_repeated_stops_the_trajectory(scripted_engine, sandbox):
    task = Task(id="div", domain="tools", prompt="Divide 1 by 0 in Python.", verifier={"kind": "exact"}, gold="x")
    config = EpisodeConfig(
        temperature=0,
        max_tokens_per_turn=48,
        tools=("python",),
        stop=StopConfig(max_turns=6, max_repeated_failures=2, repetition_repeats=0),
    )
    [trajectory] = rollout([task], scripted_engine, config, tools=SandboxTools(sandbox)).trajectories
    assert trajectory.stop_reason == "repeated_action"
    calls = [t for t in trajectory.turns if t.role == "assistant"]
    assert len(calls) == 3 and all(t.tool == "python" for t in calls)
