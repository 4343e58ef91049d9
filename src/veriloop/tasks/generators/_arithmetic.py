"""The ``arithmetic`` generator: multi-step integer arithmetic with an exact integer answer.

Five difficulty levels; each task draws its level (unless ``difficulty`` fixes one), then its
operands and operators from a random stream seeded by (seed, index), so a task does not depend
on the size of the set and the same seed always gives the same tasks.

| level | operands | range    | operators | parentheses |
|-------|----------|----------|-----------|-------------|
| 1     | 2        | 0..10    | + -       | no          |
| 2     | 3        | 0..20    | + -       | no          |
| 3     | 3        | 0..50    | + - *     | no          |
| 4     | 4        | 0..100   | + - *     | sometimes   |
| 5     | 5        | 0..1000  | + - *     | sometimes   |

``operands`` (or a range ``operands``..``max_operands``), ``min_operand``, ``max_operand`` and
``operators`` override the level's values.

``split`` keeps to one side of a fixed partition of the expressions (``train`` or
``heldout``; ``heldout_share`` of them, by a hash of the expression, whatever the seed): in
a small task space such as one-digit sums, two seeds share most tasks, and a held-out split
drawn with ``split=heldout`` shares none with a training split drawn with ``split=train``.
"""

from __future__ import annotations

import ast
import hashlib
import random
from dataclasses import dataclass
from typing import Literal

from pydantic import Field, field_validator, model_validator

from veriloop.core import Task, UserError
from veriloop.tasks._sources import GeneratorOptions, generated_task, id_variant, register_generator, seeded_streams


@dataclass(frozen=True)
class Level:
    operands: int
    max_operand: int
    operators: str
    parentheses: bool


LEVELS = {
    1: Level(2, 10, "+-", False),
    2: Level(3, 20, "+-", False),
    3: Level(3, 50, "+-*", False),
    4: Level(4, 100, "+-*", True),
    5: Level(5, 1000, "+-*", True),
}


class ArithmeticOptions(GeneratorOptions):
    difficulty: int | None = Field(default=None, ge=1, le=5, description="level 1-5; default: each task draws one")
    operands: int | None = Field(default=None, ge=2, le=12, description="numbers per expression (default: by level)")
    max_operands: int | None = Field(
        default=None, ge=2, le=12, description="with operands: draw the count uniformly from operands..max_operands"
    )
    min_operand: int = Field(default=0, ge=0, description="smallest operand")
    max_operand: int | None = Field(default=None, ge=1, le=10**9, description="largest operand (default: by level)")
    operators: str | None = Field(default=None, description="operators to use, from '+-*' (default: by level)")
    verifier: Literal["math", "exact"] = Field(
        default="math", description="'math' reads the final answer from text; 'exact' wants only the number"
    )
    instruction: str = Field(default="", description="text appended to each question, e.g. an answer format")
    domain: str = Field(default="arithmetic", min_length=1, description="domain name of the tasks")
    split: Literal["all", "train", "heldout"] = Field(
        default="all",
        description="train or heldout: only expressions on that side of a fixed partition (no task on both sides)",
    )
    heldout_share: float = Field(
        default=0.25, gt=0, lt=1, description="with split: share of the expressions on the held-out side"
    )

    @field_validator("operators")
    @classmethod
    def _known_operators(cls, operators: str | None) -> str | None:
        if operators is not None and (not operators or set(operators) - set("+-*")):
            raise ValueError("use one or more of '+', '-', '*'")
        return operators

    @model_validator(mode="after")
    def _range(self) -> ArithmeticOptions:
        if self.max_operand is not None and self.max_operand < self.min_operand:
            raise ValueError("max_operand is below min_operand")
        if self.max_operands is not None and (self.operands is None or self.max_operands < self.operands):
            raise ValueError("max_operands needs operands, and must not be below it")
        return self


def _expression(rng: random.Random, options: ArithmeticOptions, level: Level) -> str:
    count = options.operands or level.operands
    if options.max_operands is not None:
        count = rng.randint(count, options.max_operands)
    high = options.max_operand if options.max_operand is not None else level.max_operand
    low = min(options.min_operand, high)
    operators = options.operators or level.operators
    numbers = [str(rng.randint(low, high)) for _ in range(count)]
    ops = [rng.choice(operators) for _ in range(count - 1)]
    if level.parentheses and count >= 3 and rng.random() < 0.5:
        start = rng.randrange(count - 1)
        end = rng.randrange(start + 1, count)
        if (start, end) != (0, count - 1):
            numbers[start] = "(" + numbers[start]
            numbers[end] = numbers[end] + ")"
    parts = [numbers[0]]
    for op, number in zip(ops, numbers[1:]):
        parts += [op, number]
    return " ".join(parts)


def evaluate(expression: str) -> int:
    """The exact value of an expression of integers, ``+ - *`` and parentheses (no ``eval``)."""

    def value(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.BinOp):
            left, right = value(node.left), value(node.right)
            if isinstance(node.op, ast.Add):
                return left + right
            if isinstance(node.op, ast.Sub):
                return left - right
            if isinstance(node.op, ast.Mult):
                return left * right
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand)
        raise ValueError(f"unsupported expression: {expression!r}")

    return value(ast.parse(expression, mode="eval").body)


_SPLIT_DRAWS = 1000  # expressions tried per task before a split is called empty


def on_heldout_side(expression: str, share: float) -> bool:
    """Whether ``expression`` lies on the held-out side of the partition (a stable hash, not ``hash``)."""
    digest = hashlib.sha256(expression.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < share


def _split_expression(rng: random.Random, options: ArithmeticOptions, level: Level) -> str:
    """An expression on ``options.split``'s side of the partition (any expression for ``all``)."""
    for _ in range(_SPLIT_DRAWS):
        expression = _expression(rng, options, level)
        if options.split == "all" or on_heldout_side(expression, options.heldout_share) == (options.split == "heldout"):
            return expression
    raise UserError(f"split={options.split}: no expression of these options falls on that side; widen the ranges")


@register_generator("arithmetic", ArithmeticOptions)
def generate_arithmetic(options: ArithmeticOptions) -> list[Task]:
    """Multi-step integer arithmetic ("What is 12 + 7 - 3?") with exact integer answers."""
    tasks = []
    for index, rng in seeded_streams("arithmetic", options):
        level = options.difficulty or rng.randint(1, 5)
        expression = _split_expression(rng, options, LEVELS[level])
        question = f"What is {expression}?"
        if options.instruction:
            question += " " + options.instruction
        tasks.append(
            generated_task(
                "arithmetic",
                options,
                index,
                level,
                len(LEVELS),
                {"expression": expression},
                variant=id_variant(options, ("split",)),
                domain=options.domain,
                prompt=question,
                verifier={"kind": options.verifier},
                gold=str(evaluate(expression)),
            )
        )
    return tasks
