"""Seeded agent rollouts: each episode's calls sample from a seed derived from the batch's seed
and the task's index in the whole batch, as native episodes do, so a batch (or a shard of it)
samples the same tokens again; a call that names its own seed keeps it."""

from __future__ import annotations

import sys

import pytest

from veriloop.core import Task
from veriloop.rollout import AgentProgram, Gateway, agent_rollout

pytestmark = pytest.mark.e2e

AGENT = """
import json, os, sys, urllib.request
body = {"model": "policy", "messages": [{"role": "user", "content": sys.stdin.read()}], "max_tokens": 6}
if len(sys.argv) > 1:
    body["seed"] = int(sys.argv[1])
request = urllib.request.Request(
    os.environ["OPENAI_BASE_URL"] + "/chat/completions",
    data=json.dumps(body).encode(),
    headers={"Content-Type": "application/json", "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]},
)
print(json.loads(urllib.request.urlopen(request).read())["choices"][0]["message"]["content"])
"""


def _tasks() -> list[Task]:
    return [
        Task(id=f"t{i}", domain="d", prompt=f"Say something about {word}.", verifier={"kind": "exact", "answer": "x"})
        for i, word in enumerate(["kettles", "toasters", "clocks"])
    ]


def _sampled(batch) -> list[tuple[int, ...]]:
    return [t.completion_ids for t in batch.trajectories]


def test_a_seeded_batch_samples_the_same_tokens_and_its_shards_too(tiny_engine):
    program = AgentProgram(command=(sys.executable, "-c", AGENT))
    run = lambda tasks, **kw: agent_rollout(tasks, tiny_engine, program, group_size=2, max_tokens=6, **kw)  # noqa: E731
    first, again = run(_tasks(), seed=11), run(_tasks(), seed=11)
    assert _sampled(first) == _sampled(again)
    assert len(set(_sampled(first))) > 1  # samples of a group differ from each other
    assert _sampled(run(_tasks(), seed=12)) != _sampled(first)
    shard = run(_tasks()[1:], seed=11, first_task_index=1)
    assert _sampled(shard) == _sampled(first)[2:]


def test_a_call_that_names_its_seed_keeps_it(tiny_engine):
    program = AgentProgram(command=(sys.executable, "-c", AGENT, "5"))
    one = agent_rollout(_tasks()[:1], tiny_engine, program, group_size=2, max_tokens=6, seed=11)
    other = agent_rollout(_tasks()[:1], tiny_engine, program, group_size=2, max_tokens=6, seed=99)
    assert _sampled(one) == _sampled(other) and len(set(_sampled(one))) == 1


def test_an_episode_opened_with_a_seed_and_never_called_records_nothing(tiny_engine, tmp_path):
    with Gateway(tiny_engine, record_dir=tmp_path) as gateway:
        gateway.episode_url("quiet", seed=3)
        assert gateway.finish("quiet").calls == ()
    assert not (tmp_path / "episodes.jsonl").exists() or (tmp_path / "episodes.jsonl").read_text() == ""
