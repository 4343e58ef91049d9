"""The ``reasoning-gym`` importer: a seeded draw from any reasoning-gym generator.

Each task records the exact draw (dataset, config, seed, size, index) in its ``reasoning_gym``
verifier, which rebuilds the entry and scores answers with the generator's own scorer.
Generators without a single reference answer (e.g. ``graph_color``) give tasks without gold.
Tasks refuse hedges (``hedges: refuse``, written into each verifier): credit goes to one
committed answer only; ``hedges=lenient`` keeps each scorer's own partial credit for answers
that hold the gold among other words. Partial credit is kept only where the scorer pays no
non-answer (``partial_credit=auto``, written into each verifier); ``partial_credit=on`` keeps it always.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import Field, field_validator

from veriloop.core import Task, UserError
from veriloop.tasks._sources import SourceOptions, register_importer

DEFAULT_INSTRUCTION = "Give only your final answer inside <answer></answer>."


class ReasoningGymOptions(SourceOptions):
    dataset: str = Field(min_length=1, description="reasoning-gym generator name, e.g. basic_arithmetic")
    size: int = Field(default=100, ge=1, le=1_000_000, description="number of tasks")
    seed: int = Field(default=0, description="seed of the draw")
    config: dict[str, Any] = Field(default_factory=dict, description="the generator's config fields (JSON object)")
    domain: str | None = Field(default=None, description="task domain (default: the dataset name)")
    instruction: str = Field(default=DEFAULT_INSTRUCTION, description="text appended to each question")
    hedges: Literal["refuse", "lenient"] = Field(
        default="refuse",
        description="refuse: credit only for one committed answer; lenient: the scorer's own partial credit",
    )
    partial_credit: Literal["auto", "on"] = Field(
        default="auto",
        description="auto: no partial credit from a scorer that pays non-answers (the question given back, "
        "a tautology); on: the scorer's partial credit always",
    )

    @field_validator("config", mode="before")
    @classmethod
    def _json_text(cls, value: Any) -> Any:
        if isinstance(value, str):
            try:
                return json.loads(value)
            except ValueError as exc:
                raise ValueError(f"not a JSON object: {exc}") from None
        return value


def _json_safe(value: Any) -> Any:
    """``value`` if it survives a JSON round trip unchanged in meaning, else its text form."""
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError):
        return str(value)


@register_importer("reasoning-gym", ReasoningGymOptions, argument="dataset")
def import_reasoning_gym(options: ReasoningGymOptions) -> list[Task]:
    """Draw SIZE tasks from a reasoning-gym generator with SEED; scored by its own scorer."""
    import reasoning_gym
    from reasoning_gym.factory import DATASETS

    if options.dataset not in DATASETS:
        raise UserError(f"unknown reasoning-gym dataset {options.dataset!r}; known: {', '.join(sorted(DATASETS))}")
    try:
        dataset = reasoning_gym.create_dataset(options.dataset, seed=options.seed, size=options.size, **options.config)
    except (TypeError, ValueError, AssertionError) as exc:
        raise UserError(f"reasoning-gym {options.dataset}: bad config: {exc}") from None
    tasks = []
    for index in range(options.size):
        entry = dataset[index]
        question = entry["question"]
        if options.instruction:
            question = f"{question}\n\n{options.instruction}"
        answer = entry.get("answer")
        tasks.append(
            Task(
                id=f"reasoning-gym/{options.dataset}/{options.seed}/{index}",
                domain=options.domain or options.dataset,
                prompt=question,
                verifier={
                    "kind": "reasoning_gym",
                    "dataset": options.dataset,
                    "config": _json_safe(options.config),
                    "seed": options.seed,
                    "size": options.size,
                    "index": index,
                    "hedges": options.hedges,
                    "partial_credit": options.partial_credit,
                },
                gold=None if answer is None else str(answer),
                metadata={
                    "source": "reasoning-gym",
                    "dataset": options.dataset,
                    "source_metadata": _json_safe(
                        {
                            k: v
                            for k, v in entry.get("metadata", {}).items()
                            if k in ("source_dataset", "source_index", "difficulty")
                        }
                    ),
                },
            )
        )
    return tasks
