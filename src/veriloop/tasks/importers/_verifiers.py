"""The ``verifiers`` importer: a PrimeIntellect verifiers taskset (``verifiers`` 0.4, the
``verifiers.v1`` API) as a veriloop task set, its tasks unchanged.

The taskset is loaded inside the sandbox, on an environment that holds ``verifiers`` and the
taskset's package (``veriloop env build NAME --packages verifiers==0.4.0 PACKAGE``); neither is
imported here. Each task keeps its whole data (its ``TaskData`` as JSON, the answer and any
other fields its rewards read) in a ``verifiers_taskset`` verifier, which scores responses with
the task's own rewards on the same environment. The prompt is the task's system prompt, then its
prompt (text, or its messages' text). Tasks get no gold: a taskset's answer field is whatever
its rewards compare against, not a response they would give full marks.

Packages written for verifiers before 0.4 expose ``load_environment(**args)``: their rows come
from the environment's ``eval_dataset`` or ``dataset`` (``--split``), and their tasks are scored
by its rubric, the same way (see ``veriloop.verifiers``' ``verifiers_taskset`` kind). A
``MultiTurnEnv`` (one that answers each model turn) makes ``multi_turn`` tasks: their episodes
run through the environment (``veriloop.rollout``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from veriloop.core import Task
from veriloop.tasks._sources import SourceOptions, register_importer


class VerifiersOptions(SourceOptions):
    taskset: str = Field(min_length=1, description="the taskset's id: its installed package, e.g. veriloop_sums")
    environment: str = Field(min_length=1, description="the environment that holds verifiers and the taskset")
    args: dict[str, Any] = Field(default_factory=dict, description='fields of the taskset\'s config, as JSON: {"k": 1}')
    split: Literal["auto", "train", "eval"] = Field(
        default="auto",
        description="load_environment packages: eval_dataset (auto: when there is one) or dataset",
    )
    skip: int = Field(default=0, ge=0, description="leave out the first N tasks")
    size: int = Field(default=1000, ge=1, le=1_000_000, description="import at most N tasks")
    domain: str | None = Field(
        default=None, min_length=1, description="domain of every task (default: the taskset's id)"
    )


def _task_id(taskset: str, row: dict[str, Any]) -> str:
    data = row["data"]
    name = data.get("id") or data.get("name") or "/".join(str(data[k]) for k in ("split", "idx") if k in data)
    return f"{taskset}/{name}"


@register_importer("verifiers", VerifiersOptions, argument="taskset")
def import_verifiers(options: VerifiersOptions) -> list[Task]:
    """A verifiers taskset (verifiers.v1), loaded and scored in the sandbox on an environment."""
    from veriloop.verifiers import export_taskset

    rows = export_taskset(options.environment, options.taskset, options.args, options.skip, options.size, options.split)
    return [
        Task(
            id=_task_id(options.taskset, row),
            domain=options.domain or options.taskset,
            prompt=row["messages"],
            environment=options.environment,
            verifier={
                "kind": "verifiers_taskset",
                "taskset": options.taskset,
                "args": options.args,
                "data": row["data"],
                **({"multi_turn": True} if row.get("multi_turn") else {}),
            },
            metadata={"verifiers": {"type": row["type"], "key": row["key"]}},
        )
        for row in rows
    ]
