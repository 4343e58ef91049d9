"""The ``model`` judge backend: a ``judge`` verifier whose ``model`` is a local model directory
is served by a veriloop engine (``create_engine("hf", model=DIR)``), one per directory per
process, built on first use and kept.

The verifiers sit below the engines, so this module registers the backend with
``veriloop.verifiers.JUDGE_BACKENDS`` when ``veriloop.rollout`` is imported. A batch of requests
is one ``generate`` call (the engine batches the prompts); the engine holds one forward pass at
a time, so judges on several threads take turns. A local judge has no wall-clock timeout: its
reply is bounded by ``max_tokens``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence

from veriloop.rollout._engine import Engine, create_engine
from veriloop.rollout._sampling import SamplingParams
from veriloop.verifiers import JUDGE_BACKENDS, JudgeBackend, JudgeConfig, JudgeRequest, JudgeUnavailable

_engines: dict[str, Engine] = {}
_lock = threading.Lock()


def judge_engine(directory: str) -> Engine:
    """The process's engine for the judge model in ``directory``."""
    path = os.path.abspath(os.path.expanduser(directory))
    with _lock:
        if path not in _engines:
            _engines[path] = create_engine("hf", model=path)
        return _engines[path]


class EngineJudge:
    """A judge answered by a veriloop engine."""

    def __init__(self, directory: str):
        self.directory = directory

    def complete(self, requests: Sequence[JudgeRequest]) -> list[str | JudgeUnavailable]:
        try:
            engine = judge_engine(self.directory)
        except Exception as exc:  # a directory that holds no model: no attempt can succeed
            return [JudgeUnavailable(f"cannot load the judge model {self.directory}: {exc}", retry=False)] * len(
                requests
            )
        replies: list[str | JudgeUnavailable] = [JudgeUnavailable("not asked")] * len(requests)
        by_params: dict[tuple[float, int], list[int]] = {}
        for index, request in enumerate(requests):
            by_params.setdefault((request.temperature, request.max_tokens), []).append(index)
        for (temperature, max_tokens), indices in by_params.items():
            params = SamplingParams(n=1, temperature=temperature, max_tokens=max_tokens)
            try:
                samples = engine.generate([list(requests[i].messages) for i in indices], params)
            except Exception as exc:  # the engine broke: these requests failed, others may not
                for index in indices:
                    replies[index] = JudgeUnavailable(f"the judge engine failed: {type(exc).__name__}: {exc}")
                continue
            for index, (sample,) in zip(indices, samples):
                failed = sample.finish_reason == "error"
                replies[index] = JudgeUnavailable(sample.error or "generation failed") if failed else sample.text
        return replies


@JUDGE_BACKENDS.register("model")
def model_judge(config: JudgeConfig) -> JudgeBackend:
    """The judge in ``config.model`` (the config's validator made sure it is set)."""
    return EngineJudge(str(config.model))
