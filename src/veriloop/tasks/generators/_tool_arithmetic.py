"""The ``tool-arithmetic`` generator: products too large to work out token by token.

"Use Python: what is 4821 * 739?" A model is meant to run the product with the python tool
(``<run_python>print(4821 * 739)</run_python>``), read the result back and submit it
(``<submit>3562719</submit>``); the ``exact`` verifier judges the submitted answer. The
episode is multi-turn, and its tool call runs in the sandbox.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from veriloop.core import Task
from veriloop.tasks._sources import GeneratorOptions, generated_task, register_generator, seeded_streams


class ToolArithmeticOptions(GeneratorOptions):
    min_digits: int = Field(default=3, ge=1, le=12, description="fewest digits of a factor")
    max_digits: int = Field(default=4, ge=1, le=12, description="most digits of a factor")
    domain: str = Field(default="tool", min_length=1, description="domain name of the tasks")

    @model_validator(mode="after")
    def _range(self) -> ToolArithmeticOptions:
        if self.max_digits < self.min_digits:
            raise ValueError("max_digits is below min_digits")
        return self


@register_generator("tool-arithmetic", ToolArithmeticOptions)
def generate_tool_arithmetic(options: ToolArithmeticOptions) -> list[Task]:
    """Products of large integers to compute with the python tool and submit (exact answers)."""
    tasks = []
    for index, rng in seeded_streams("tool-arithmetic", options):
        digits = [rng.randint(options.min_digits, options.max_digits) for _ in range(2)]
        a, b = (rng.randint(10 ** (d - 1), 10**d - 1) for d in digits)
        expression = f"{a} * {b}"
        tasks.append(
            generated_task(
                "tool-arithmetic",
                options,
                index,
                max(digits) - options.min_digits + 1,
                options.max_digits - options.min_digits + 1,
                {"expression": expression},
                domain=options.domain,
                prompt=f"Use Python: what is {expression}?",
                verifier={"kind": "exact"},
                gold=str(a * b),
            )
        )
    return tasks
