"""One-digit products in the ``load_environment`` format of verifiers before 0.4: an environment
with ``dataset``, ``eval_dataset``, ``system_prompt`` and a ``rubric`` whose async
``score_rollout(prompt, completion, answer, state, task, info)`` returns a reward and metrics
(the weighted sum of its reward functions, as verifiers' ``Rubric`` does)."""

import re
from dataclasses import dataclass, field


@dataclass
class RolloutScore:
    reward: float
    metrics: dict = field(default_factory=dict)


def _boxed(completion):
    found = re.findall(r"\\boxed\{([^}]*)\}", completion[-1]["content"]) if completion else []
    return found[-1].strip() if found else None


def correct_answer(completion, answer, **kwargs):
    return float(_boxed(completion) == answer)


def boxed_format(completion, **kwargs):
    return float(_boxed(completion) is not None)


class Rubric:
    def __init__(self, funcs, weights):
        self.funcs, self.weights = funcs, weights

    async def score_rollout(self, prompt, completion, answer, state, task="default", info=None, **kwargs):
        metrics = {f.__name__: f(completion=completion, answer=answer, info=info) for f in self.funcs}
        reward = sum(w * metrics[f.__name__] for f, w in zip(self.funcs, self.weights))
        return RolloutScore(reward=reward, metrics=metrics)


class Environment:
    def __init__(self, dataset, eval_dataset, system_prompt, rubric):
        self.dataset, self.eval_dataset, self.system_prompt, self.rubric = dataset, eval_dataset, system_prompt, rubric


def _rows(pairs):
    return [
        {"question": f"What is {a} * {b}?", "answer": str(a * b), "info": {"factors": [a, b]}, "task": "products"}
        for a, b in pairs
    ]


def load_environment(num_train=4, num_eval=3, **kwargs):
    pairs = [(a, (a * 3) % 10) for a in range(1, 10)]
    return Environment(
        dataset=_rows(pairs[:num_train]),
        eval_dataset=_rows(pairs[num_train : num_train + num_eval]),
        system_prompt="Put the final answer in \\boxed{}.",
        rubric=Rubric([correct_answer, boxed_format], [0.8, 0.2]),
    )
