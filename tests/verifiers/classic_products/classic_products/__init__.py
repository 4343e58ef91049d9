"""One-digit products as an environment of verifiers 0.1 (``load_environment`` returning a
``SingleTurnEnv`` with a ``dataset``, an ``eval_dataset`` and a weighted ``Rubric``)."""

import re

import verifiers as vf
from datasets import Dataset


def _boxed(completion):
    text = completion[-1]["content"] if isinstance(completion, list) and completion else str(completion)
    found = re.findall(r"\\boxed\{([^}]*)\}", text)
    return found[-1].strip() if found else None


def correct_answer(completion, answer, **kwargs):
    return float(_boxed(completion) == answer)


def boxed_format(completion, **kwargs):
    return float(_boxed(completion) is not None)


def _rows(pairs):
    return Dataset.from_list(
        [
            {"question": f"What is {a} * {b}?", "answer": str(a * b), "info": {"factors": [a, b]}, "task": "products"}
            for a, b in pairs
        ]
    )


def load_environment(num_train=4, num_eval=3, **kwargs):
    pairs = [(a, (a * 3) % 10) for a in range(1, 10)]
    return vf.SingleTurnEnv(
        dataset=_rows(pairs[:num_train]),
        eval_dataset=_rows(pairs[num_train : num_train + num_eval]),
        system_prompt="Put the final answer in \\boxed{}.",
        rubric=vf.Rubric(funcs=[correct_answer, boxed_format], weights=[0.8, 0.2]),
    )
