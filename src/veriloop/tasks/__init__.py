"""Layer 2: task sets: loading and checking them (importers and generators build on this)."""

from veriloop.tasks._validate import TaskSetCheck, check_task, check_task_file, load_tasks
from veriloop.tasks import _arithmetic, _import_reasoning_gym, _import_rows, _kept_constraints, _numeric_tables  # noqa: F401
from veriloop.tasks import _import_humaneval  # noqa: F401  (registers the importer)
from veriloop.tasks import _code_functions, _tool_arithmetic, _word_problems  # noqa: F401  (seed-loop generators)
from veriloop.tasks import _import_terminal, _terminal_repos  # noqa: F401  (terminal-jsonl, terminal-repos)
from veriloop.tasks import _financial_docs, _import_financial  # noqa: F401  (financial-docs generator and importer)
from veriloop.tasks._cad_parts import CAD_ENVIRONMENT_PACKAGES  # and registers the cad generator
from veriloop.tasks._contamination import (
    ContaminationReport,
    Overlap,
    contamination,
    decontaminate,
    normalise_text,
    question_text,
)
from veriloop.tasks._sources import (
    GENERATORS,
    IMPORTERS,
    GeneratorOptions,
    SourceOptions,
    TaskSource,
    generate_tasks,
    import_tasks,
    register_generator,
    register_importer,
)

__all__ = [
    "GENERATORS",
    "IMPORTERS",
    "ContaminationReport",
    "GeneratorOptions",
    "Overlap",
    "SourceOptions",
    "TaskSetCheck",
    "TaskSource",
    "check_task",
    "check_task_file",
    "contamination",
    "decontaminate",
    "generate_tasks",
    "import_tasks",
    "load_tasks",
    "normalise_text",
    "question_text",
    "register_generator",
    "register_importer",
    "CAD_ENVIRONMENT_PACKAGES",
]
