"""A ranking judge in rollouts: each task's group is judged side by side once its episodes end
(one request per group, every reward relative to the group's), while a scoring judge still
judges each answer alone. The judge is the rule-based one on loopback (``rule_judge.py``); the
answers come from a replay script."""

from __future__ import annotations

import json

from veriloop.core import Task
from veriloop.rollout import EpisodeConfig, ReplayEngine, StopConfig, rollout

RUBRIC = "The reply offers the customer a 'refund' and says 'sorry' for the broken kettle."


def _task(task_id: str, prompt: str, server, **fields) -> Task:
    verifier = {"kind": "judge", "rubric": RUBRIC, "url": server.url, "served_model": "rule-judge", **fields}
    return Task(id=task_id, domain="support", prompt=prompt, verifier=verifier)


def _replay(tmp_path, replies: dict[str, str]) -> ReplayEngine:
    script = tmp_path / "script.jsonl"
    script.write_text("".join(json.dumps({"prompt": p, "turns": [t]}) + "\n" for p, t in replies.items()))
    return ReplayEngine(script)


def test_a_ranking_judge_judges_each_group_together_after_its_episodes(tmp_path, rule_judge):
    tasks = [
        _task("kettle", "A kettle arrived broken. Write the reply.", rule_judge, mode="rank"),
        _task("toaster", "A toaster arrived broken. Write the reply.", rule_judge, mode="rank"),
    ]
    engine = _replay(
        tmp_path,
        {tasks[0].prompt: "Sorry! A refund is on its way.", tasks[1].prompt: "Sorry for that."},
    )
    before = len(rule_judge.requests)
    batch = rollout(tasks, engine, EpisodeConfig(stop=StopConfig(max_turns=1)), group_size=3, seed=0)
    assert len(rule_judge.requests) - before == 2  # one request per group, not one per episode
    rewards = [t.reward for t in batch.trajectories]
    assert rewards == [1.0, 1.0, 1.0, 0.5, 0.5, 0.5]
    assert all("(ranked among 3)" in t.score.detail for t in batch.trajectories)
    assert [t.score.id for t in batch.trajectories] == [t.id for t in batch.trajectories]
    assert batch.metrics.mean_reward == 0.75


def test_a_scoring_judge_and_groups_of_one_are_judged_per_episode(tmp_path, rule_judge):
    scored = _task("kettle", "A kettle arrived broken. Write the reply.", rule_judge)
    engine = _replay(tmp_path, {scored.prompt: "Sorry! A refund is on its way."})
    before = len(rule_judge.requests)
    batch = rollout([scored], engine, EpisodeConfig(stop=StopConfig(max_turns=1)), group_size=2, seed=0)
    assert len(rule_judge.requests) - before == 2 and [t.reward for t in batch.trajectories] == [1.0, 1.0]
    ranked = _task("kettle", "A kettle arrived broken. Write the reply.", rule_judge, mode="rank")
    [alone] = rollout([ranked], engine, EpisodeConfig(stop=StopConfig(max_turns=1)), group_size=1).trajectories
    assert alone.reward == 1.0 and "(ranked alone" in alone.score.detail


AGENT = """
import json, os, sys, urllib.request
prompt = sys.stdin.read()
body = {"model": "policy", "messages": [{"role": "user", "content": prompt}], "max_tokens": 2}
request = urllib.request.Request(
    os.environ["OPENAI_BASE_URL"] + "/chat/completions",
    data=json.dumps(body).encode(),
    headers={"Content-Type": "application/json", "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]},
)
urllib.request.urlopen(request).read()
print("Sorry! A refund is on its way." if "kettle" in prompt else "Sorry for that.")
"""


def test_an_agents_groups_are_ranked_together_too(tiny_engine, rule_judge):
    import sys

    from veriloop.rollout import AgentProgram, agent_rollout

    tasks = [
        _task("kettle", "A kettle arrived broken. Write the reply.", rule_judge, mode="rank"),
        _task("toaster", "A toaster arrived broken. Write the reply.", rule_judge, mode="rank"),
    ]
    program = AgentProgram(command=(sys.executable, "-c", AGENT))
    before = len(rule_judge.requests)
    batch = agent_rollout(tasks, tiny_engine, program, group_size=2, max_tokens=2, seed=0)
    assert len(rule_judge.requests) - before == 2
    assert [t.reward for t in batch.trajectories] == [1.0, 1.0, 0.5, 0.5]
    assert all("(ranked among 2)" in t.score.detail for t in batch.trajectories)
