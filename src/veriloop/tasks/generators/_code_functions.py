"""The ``code-functions`` generator: one-line Python functions from a short specification.

Each task asks for ``f`` from a sentence such as "Write f(x): x plus 2, times 3." and is
verified by ``python_tests`` with dynamic tests only: the gold solution is the reference, the
inputs are drawn around seed inputs the prompt never shows, and the reward is the fraction
of those hidden cases passed. Shapes, each drawn with equal chance:

| shape      | specification                     | gold body            |
|------------|-----------------------------------|----------------------|
| int-two    | x times 3, plus 2                 | ``x * 3 + 2``        |
| int-paren  | x plus 2, times 3                 | ``(x + 2) * 3``      |
| string     | s repeated 3 times                | ``s * 3``            |
| list       | every item of xs plus 2           | ``[v + 2 for v in xs]`` |

The small vocabulary keeps the task learnable by a tiny model in minutes, while the
"int-paren" shape needs the parentheses a careless answer leaves out (its result is then
wrong on almost every input, but right on some, so the reward is partial).
"""

from __future__ import annotations

import random

from pydantic import Field

from veriloop.core import Task
from veriloop.tasks._sources import GeneratorOptions, generated_task, register_generator, seeded_streams

WORDS = {"+": "plus", "-": "minus", "*": "times"}
SHAPES = ("int-two", "int-paren", "string", "list")


class CodeFunctionsOptions(GeneratorOptions):
    max_constant: int = Field(default=9, ge=1, le=99, description="largest constant in a specification")
    dynamic_cases: int = Field(default=8, ge=1, le=100, description="hidden test inputs per task")
    unsafe_behaviour_penalty: float = Field(
        default=0.1, ge=0, le=1, description="taken off the reward of an answer whose run behaves unsafely"
    )
    stderr_penalty: float = Field(
        default=0.0, ge=0, le=1, description="taken off the reward of an answer whose run writes to stderr (a warning)"
    )
    domain: str = Field(default="code", min_length=1, description="domain name of the tasks")


def _spec(rng: random.Random, shape: str, high: int) -> tuple[str, str, str, list[list[object]]]:
    """(argument, specification, gold body, seed inputs) of one task."""
    a, b = rng.randint(1, high), rng.randint(1, high)
    if shape == "int-two":
        first, second = rng.choice("+-*"), rng.choice("+-")
        return "x", f"x {WORDS[first]} {a}, {WORDS[second]} {b}", f"x {first} {a} {second} {b}", [[3], [-2]]
    if shape == "int-paren":
        first = rng.choice("+-")
        return "x", f"x {WORDS[first]} {a}, times {b}", f"(x {first} {a}) * {b}", [[3], [-2]]
    if shape == "string":
        return "s", f"s repeated {a} times", f"s * {a}", [["ab"], ["xyz"]]
    op = rng.choice("+-*")
    return "xs", f"every item of xs {WORDS[op]} {a}", f"[v {op} {a} for v in xs]", [[[1, 2, 3]], [[5, -4]]]


@register_generator("code-functions", CodeFunctionsOptions)
def generate_code_functions(options: CodeFunctionsOptions) -> list[Task]:
    """One-line Python functions from a specification, graded on hidden inputs (python_tests)."""
    tasks = []
    for index, rng in seeded_streams("code-functions", options):
        shape = rng.choice(SHAPES)
        argument, spec, body, inputs = _spec(rng, shape, options.max_constant)
        gold = f"def f({argument}):\n    return {body}\n"
        verifier = {
            "kind": "python_tests",
            "entry_point": "f",
            "suite": "dynamic",
            "inputs": inputs,
            "dynamic_cases": options.dynamic_cases,
            "seed": index,
            "timeout_s": 5.0,
            "unsafe_behaviour_penalty": options.unsafe_behaviour_penalty or None,
        }
        if options.stderr_penalty:
            verifier["stderr_penalty"] = options.stderr_penalty
        tasks.append(
            generated_task(
                "code-functions",
                options,
                index,
                SHAPES.index(shape) + 1,
                len(SHAPES),
                {"shape": shape, "spec": spec, "body": body},
                domain=options.domain,
                prompt=f"Write f({argument}): {spec}.",
                verifier=verifier,
                gold=gold,
            )
        )
    return tasks
