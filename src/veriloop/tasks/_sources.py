"""Registries of task generators and importers: plain callables from typed options to tasks.

A generator draws a seeded task set (``generate_tasks("arithmetic", seed=1, size=100)``); an
importer converts existing data (``import_tasks("jsonl", file="gsm8k.jsonl")``). Each is
registered with a pydantic options model, so the command line and Python share one schema
and a bad option is a UserError that names the known options.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from veriloop.core import Registry, Task, UserError

OptionsT = TypeVar("OptionsT", bound="SourceOptions")


class SourceOptions(BaseModel):
    """Base of every generator's and importer's options: frozen, unknown options rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class GeneratorOptions(SourceOptions):
    """Options every generator takes: the same seed and size always give the same tasks."""

    seed: int = Field(description="random seed; the same seed gives the same tasks")
    size: int = Field(ge=1, le=10_000_000, description="number of tasks")


@dataclass(frozen=True)
class TaskSource(Generic[OptionsT]):
    """A named generator or importer: its options model and the callable that builds tasks."""

    name: str
    options: type[OptionsT]
    build: Callable[[OptionsT], list[Task]]
    argument: str | None = None  # the option filled by the command line's positional argument
    environment_packages: tuple[str, ...] = ()
    """Packages the environment its tasks name must hold; a missing environment's message spells
    them out in its build command."""

    @property
    def summary(self) -> str:
        return (self.build.__doc__ or "").strip().split("\n")[0]

    def option_help(self) -> list[tuple[str, str]]:
        """``(--option-name, description)`` for each option, positional argument excluded."""
        return [
            ("--" + name.replace("_", "-"), field.description or "")
            for name, field in self.options.model_fields.items()
            if name != self.argument
        ]

    def parse_options(self, options: Mapping[str, Any]) -> OptionsT:
        """Validated options; a UserError naming every bad option otherwise."""
        try:
            return self.options.model_validate(dict(options))
        except ValidationError as exc:
            raise UserError(f"{self.name}: {self._describe(exc)}") from None

    def _describe(self, error: ValidationError) -> str:
        parts = []
        for item in error.errors():
            field = str(item["loc"][0]) if item["loc"] else ""
            shown = field if field == self.argument else "--" + field.replace("_", "-")
            if item["type"] == "extra_forbidden":
                known = ", ".join(option for option, _ in self.option_help())
                parts.append(f"unknown option {shown}; known: {known}")
            elif item["type"] == "missing":
                parts.append(f"missing {shown}")
            else:
                parts.append(f"{shown}: {str(item['msg']).removeprefix('Value error, ')}")
        return "; ".join(dict.fromkeys(parts))

    def run(self, options: Mapping[str, Any]) -> list[Task]:
        return self.build(self.parse_options(options))


GENERATORS: Registry[TaskSource[Any]] = Registry("task generator")
IMPORTERS: Registry[TaskSource[Any]] = Registry("task importer")


def seeded_streams(generator: str, options: GeneratorOptions) -> Iterator[tuple[int, random.Random]]:
    """``(index, rng)`` per task: each task's own stream, seeded by (generator, seed, index).

    A task therefore does not depend on the size of the set, and one seed always gives the
    same tasks (string seeds are hashed with SHA-512, not Python's randomised ``hash``).
    """
    for index in range(options.size):
        yield index, random.Random(f"{generator}:{options.seed}:{index}")


def id_variant(options: GeneratorOptions, names: tuple[str, ...]) -> str:
    """The options among ``names`` that differ from their defaults, as ``name=value,...`` ("" when
    none): the part of a task id that tells apart the kinds of task one generator draws from one
    seed space, so that sets drawn with the same seed and different options can be merged."""
    fields = type(options).model_fields
    return ",".join(
        f"{name}={getattr(options, name)}" for name in names if getattr(options, name) != fields[name].default
    )


def generated_task(
    generator: str,
    options: GeneratorOptions,
    index: int,
    level: int,
    levels: int,
    metadata: Mapping[str, Any],
    variant: str = "",
    **fields: Any,
) -> Task:
    """A generated task with the standard id, difficulty (level / levels) and metadata; the id is
    ``GENERATOR/SEED/INDEX``, or ``GENERATOR/VARIANT/SEED/INDEX`` with a ``variant`` (``id_variant``)."""
    return Task(
        id="/".join([generator, *([variant] if variant else []), str(options.seed), str(index)]),
        difficulty=level / levels,
        metadata={"generator": generator, "seed": options.seed, "level": level, **metadata},
        **fields,
    )


def register_generator(
    name: str, options: type[OptionsT], environment_packages: tuple[str, ...] = ()
) -> Callable[[Callable[[OptionsT], list[Task]]], Callable[[OptionsT], list[Task]]]:
    """Decorator registering ``generate(options) -> list[Task]``; ``options`` extends GeneratorOptions.
    ``environment_packages``: what the environment its tasks run on must hold (see ``TaskSource``);
    its tasks must then carry ``metadata["generator"]`` (``generated_task`` writes it)."""
    if not issubclass(options, GeneratorOptions):
        raise TypeError("generator options must extend GeneratorOptions (seed and size)")

    def add(build: Callable[[OptionsT], list[Task]]) -> Callable[[OptionsT], list[Task]]:
        GENERATORS.add(
            name, TaskSource(name=name, options=options, build=build, environment_packages=environment_packages)
        )
        return build

    return add


def register_importer(
    name: str, options: type[OptionsT], argument: str | None = None
) -> Callable[[Callable[[OptionsT], list[Task]]], Callable[[OptionsT], list[Task]]]:
    """Decorator registering ``load(options) -> list[Task]``; ``argument`` names the positional option."""

    def add(build: Callable[[OptionsT], list[Task]]) -> Callable[[OptionsT], list[Task]]:
        IMPORTERS.add(name, TaskSource(name=name, options=options, build=build, argument=argument))
        return build

    return add


def generate_tasks(generator: str, /, **options: Any) -> list[Task]:
    """Draw a task set from a registered generator: ``generate_tasks("arithmetic", seed=0, size=10)``."""
    return GENERATORS.get(generator).run(options)


def import_tasks(importer: str, /, **options: Any) -> list[Task]:
    """Convert data with a registered importer: ``import_tasks("jsonl", file="train.jsonl")``."""
    return IMPORTERS.get(importer).run(options)
