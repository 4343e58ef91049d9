"""Training an agent program as it is written: `rollout.agent` runs the user's program per
episode against a gateway over the policy; the tokens the model sampled in its calls are trained
on, and the program's answer is scored. The example agent (examples/agents/calculator_agent.py,
plain `openai` client, not one line of veriloop) trains unchanged."""

import sys
from pathlib import Path

import pytest

from veriloop.rollout import TrajectoryStore
from veriloop.training import RLTrainer

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agents"


def _agent_config(make_config, name, agent, steps, prompts=2, group_size=8, **sections):
    return make_config(
        name=name,
        rollout={"prompts_per_step": prompts, "group_size": group_size, "max_tokens": 8, "agent": agent},
        **{"run": {"steps": steps}, **sections},
    )


@pytest.fixture(scope="module")
def long_tiny_model(tmp_path_factory):
    """The tiny model with room for the MCP server's tool schemas in its prompt (about 1,500 tokens)."""
    from veriloop.training import TinyModelSpec, init_tiny_model

    return init_tiny_model(tmp_path_factory.mktemp("long-tiny"), TinyModelSpec(max_positions=4096))


@pytest.mark.e2e
def test_the_example_agent_trains_unchanged_and_its_reward_rises(make_config, digit_tasks):
    """Digit tasks (a random tiny model writes a digit sometimes, so RL has signal): the agent's
    answers earn more as the policy it calls is trained through the gateway."""
    agent = {"callable": "calculator_agent:solve", "cwd": str(EXAMPLE)}
    config = _agent_config(make_config, "agent", agent, steps=12, run={"steps": 12, "eval_every": 12})
    trainer = RLTrainer(config, tasks=digit_tasks, heldout=digit_tasks[:4])
    history = trainer.train()
    assert 0 <= history[-1]["eval/pass@1"] <= 1  # held-out evaluation runs (through run_rollout)
    rewards = [metrics["reward/sampled_mean"] for metrics in history]
    assert all(metrics["groups/infra_error"] == 0 for metrics in history), history
    assert sum(rewards[-4:]) / 4 > sum(rewards[:4]) / 4 + 0.1, rewards
    trajectories = list(TrajectoryStore(trainer.out / "trajectories"))
    assert trajectories and all(t.metadata["gateway"]["calls"] >= 1 for t in trajectories)
    for trajectory in trajectories:  # trained on exactly what the model sampled in its calls
        assert trajectory.completion_ids and set(trajectory.loss_mask) <= {0, 1}
        sampled = [i for i, m in zip(trajectory.completion_ids, trajectory.loss_mask) if m]
        assert sampled == [i for turn in trajectory.turns if turn.role == "assistant" for i in turn.token_ids]
    trainer.close()


@pytest.mark.e2e
def test_mcp_tools_reach_the_model_through_the_gateway(make_config, digit_tasks, long_tiny_model):
    """veriloop's own MCP agent (`veriloop.mcp:run_agent`) with the servers `rollout.agent.mcp`
    names: every episode starts its sandboxed server, whose tools the model is shown in the
    recorded prompt, and a few steps train on the recorded calls."""
    server = {"command": ["python", "-I", "-m", "veriloop.mcp.server"]}
    agent = {"callable": "veriloop.mcp:run_agent", "mcp": [server]}
    config = _agent_config(make_config, "mcp", agent, steps=2, group_size=4, model={"path": str(long_tiny_model)})
    trainer = RLTrainer(config, tasks=digit_tasks)
    history = trainer.train()
    assert len(history) == 2 and all(metrics["groups/infra_error"] == 0 for metrics in history), history
    trajectories = list(TrajectoryStore(trainer.out / "trajectories"))
    assert trajectories
    for trajectory in trajectories:
        shown = trainer.tokenizer.decode(list(trajectory.contexts()[0].prompt_ids))
        assert "calculate" in shown and "write_file" in shown  # the MCP server's tools
    trainer.close()


def test_an_agent_run_refuses_the_native_loops_settings_and_bad_mcp_entries(make_config):
    with pytest.raises(ValueError, match="does not combine with rollout.tools, rollout.max_turns > 1"):
        make_config(rollout={"agent": {"command": ["python", "a.py"]}, "tools": ["python"], "max_turns": 3})
    with pytest.raises(ValueError, match="rollout.agent.mcp: unknown field '0.neither'"):
        make_config(rollout={"agent": {"callable": "veriloop.mcp:run_agent", "mcp": [{"neither": 1}]}})
    with pytest.raises(ValueError, match="exactly one of command or callable"):
        make_config(rollout={"agent": {"command": [sys.executable], "callable": "m:f"}})
