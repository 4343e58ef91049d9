"""A local judge model served by a veriloop engine (``model``: a directory). The tiny model is
random, so it cannot judge: what it shows is the path itself, that its replies come from the
engine's own greedy decoding and that a reply without the verdict lines is an infra error,
kept in the detail, never a reward of 0."""

from __future__ import annotations

import subprocess
import sys

import pytest

from veriloop.core import Response, Task
from veriloop.tasks import check_task
from veriloop.verifiers import JUDGE_BACKENDS, JudgeConfig, JudgeRequest, verify

pytestmark = pytest.mark.e2e


def judged(model_dir, answer: str, **fields):
    verifier = {"kind": "judge", "rubric": "The reply is kind.", "model": str(model_dir), "max_tokens": 16, **fields}
    task = Task(id="t", domain="support", prompt="Say hello.", verifier=verifier)
    return task, verify(task, Response(id="r", task_id="t", response=answer))


def test_a_local_judges_replies_are_its_engines_greedy_samples(tiny_model_dir, tiny_engine):
    import veriloop.rollout  # noqa: F401  (registers the model backend)
    from veriloop.rollout import SamplingParams

    config = JudgeConfig(rubric="The reply is kind.", model=str(tiny_model_dir))
    requests = [
        JudgeRequest(({"role": "system", "content": "Judge."}, {"role": "user", "content": text}), 0.0, 12)
        for text in ("Hello there.", "Go away.")
    ]
    replies = JUDGE_BACKENDS.get("model")(config).complete(requests)
    expected = tiny_engine.generate([list(r.messages) for r in requests], SamplingParams(temperature=0, max_tokens=12))
    assert replies == [samples[0].text for samples in expected]


def test_a_local_judge_without_a_verdict_is_an_infra_error_with_its_reply_kept(tiny_model_dir):
    import veriloop.rollout  # noqa: F401  (registers the model backend)

    _, result = judged(tiny_model_dir, "Hello, friend!", retries=1)
    assert result.status == "infra_error" and result.reward is None
    assert "no verdict after 2 attempt(s)" in result.detail
    assert "attempt 2: verdict out of format" in result.detail and "--- judge reply ---" in result.detail


def test_a_missing_judge_model_is_a_task_problem_and_an_infra_error(tmp_path):
    import veriloop.rollout  # noqa: F401  (registers the model backend)

    task, result = judged(tmp_path / "nowhere", "Hello")
    assert check_task(task) == f"judge verifier: the judge model {str(tmp_path / 'nowhere')!r} is not a directory"
    assert result.status == "infra_error" and "cannot load the judge model" in result.detail
    nested = task.model_copy(update={"verifier": {"kind": "all_of", "checks": [{"verifier": task.verifier}]}})
    assert "checks[0]: judge: the judge model" in check_task(nested)


def test_without_the_rollout_layer_a_local_judge_says_what_is_missing(tiny_model_dir):
    code = (
        "from veriloop.core import Response, Task\n"
        "from veriloop.verifiers import verify\n"
        f"v = {{'kind': 'judge', 'rubric': 'Be kind.', 'model': {str(tiny_model_dir)!r}}}\n"
        "s = verify(Task(id='t', domain='d', prompt='p', verifier=v), Response(id='r', task_id='t', response='hi'))\n"
        "print(s.status, s.detail.splitlines()[0])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.startswith("infra_error") and "importing veriloop.rollout registers" in out
