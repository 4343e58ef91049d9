"""Products worked out with a tool, as a ``ToolEnv`` of verifiers 0.1: the environment offers a
``multiply`` tool (OpenAI tool calls, answered with tool messages) until the model answers without
a call; its rubric pays the right boxed product and, apart, having called the tool (read off the
rollout's tool messages)."""

import re

import verifiers as vf
from datasets import Dataset


def multiply(a: int, b: int) -> int:
    """Multiply two integers.

    Args:
        a: the first factor
        b: the second factor
    """
    return a * b


def _boxed(completion):
    text = completion[-1]["content"] if completion else ""
    found = re.findall(r"\\boxed\{([^}]*)\}", str(text or ""))
    return found[-1].strip() if found else None


def correct_answer(completion, answer, **kwargs):
    return float(_boxed(completion) == answer)


def used_the_tool(completion, **kwargs):
    return float(any(message["role"] == "tool" for message in completion))


def load_environment(**kwargs):
    rows = [
        {"question": f"What is {a} * {b}? Put the answer in \\boxed{{}}.", "answer": str(a * b)} for a, b in [(6, 7)]
    ]
    return vf.ToolEnv(
        dataset=Dataset.from_list(rows),
        tools=[multiply],
        max_turns=3,
        rubric=vf.Rubric(funcs=[correct_answer, used_the_tool], weights=[0.8, 0.2]),
    )
