"""An example plugin: a verifier kind, an advantage estimator and a generation engine.

A plugin is a module that registers what it adds when imported. Name it in a train config
(``plugins: [my_plugin.py]``, relative to the config), on the command line (``veriloop eval
... --plugin my_plugin.py``), or as an entry point of your package, which every process then
imports without being told:

    [project.entry-points."veriloop.plugins"]
    mine = "my_package.my_plugin"
"""

from __future__ import annotations

import torch

from veriloop.algorithms import ADVANTAGE_ESTIMATORS
from veriloop.rollout import ENGINES, Sample
from veriloop.verifiers import Verdict, VerifierConfig, register_verifier


class WordCountConfig(VerifierConfig):
    words: int  # a task's verifier: {"kind": "word_count", "words": 3}


@register_verifier("word_count", WordCountConfig)
def word_count(config: WordCountConfig, task, text: str) -> Verdict:
    found = len(text.split())
    passed = found == config.words
    return Verdict(reward=float(passed), passed=passed, feedback="" if passed else f"{found} words, not {config.words}")


@ADVANTAGE_ESTIMATORS.register("mean_baseline")
def mean_baseline(rewards: torch.Tensor, group_size: int, eps: float = 1e-6) -> torch.Tensor:
    groups = rewards.view(-1, group_size)  # (prompts, group_size)
    return (groups - groups.mean(dim=1, keepdim=True)).view(-1)  # (prompts * group_size,)


@ENGINES.register("constant")
class ConstantEngine:
    """Answers every prompt with the same text (a text-level engine: no tokens, no log-probs)."""

    name, tokenizer, policy_version = "constant", None, 0

    def __init__(self, text: str = "forty two"):
        self.text = text

    def generate(self, prompts, params):
        return [[Sample(self.text, (), (), "stop") for _ in range(params.n)] for _ in prompts]

    async def agenerate(self, prompts, params):
        return self.generate(prompts, params)

    def update_weights(self, state_dict, version):
        self.policy_version = version

    def close(self):
        pass
