"""The example plugin of docs/extending.md works as the page says."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

EXAMPLE = Path(__file__).parents[1] / "examples" / "my_plugin.py"

USE = f"""
import json, torch
from veriloop.core import Response, Task, load_plugins
from veriloop.algorithms import compute_advantages
from veriloop.rollout import EpisodeConfig, StopConfig, create_engine, rollout
from veriloop.verifiers import verify

load_plugins([{str(EXAMPLE)!r}])
task = Task(id="t", domain="text", prompt="Say forty two in words.", verifier={{"kind": "word_count", "words": 2}})
wrong = verify(task, Response(id="r", task_id="t", response="42"))
advantages = compute_advantages("mean_baseline", torch.tensor([1.0, 0.0, 0.0, 1.0]), group_size=2).tolist()
batch = rollout([task], create_engine("constant"), EpisodeConfig(stop=StopConfig(max_turns=1)), group_size=2, seed=0)
print(json.dumps({{"wrong": [wrong.reward, wrong.feedback], "advantages": advantages,
                  "rollout": [t.reward for t in batch.trajectories]}}))
"""


def test_the_example_plugin_adds_a_kind_an_estimator_and_an_engine():
    environment = {k: v for k, v in os.environ.items() if k != "VERILOOP_PLUGINS"}
    done = subprocess.run([sys.executable, "-c", USE], capture_output=True, text=True, env=environment, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result == {"wrong": [0.0, "1 words, not 2"], "advantages": [0.5, -0.5, -0.5, 0.5], "rollout": [1.0, 1.0]}
