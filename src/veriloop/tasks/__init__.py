"""Layer 2: task sets: loading and checking them (importers and generators build on this)."""

from veriloop.tasks._validate import TaskSetCheck, check_task, check_task_file, load_tasks
from veriloop.tasks import generators, importers  # noqa: F401  (registers the generators and importers)
from veriloop.tasks.generators._cad_parts import CAD_ENVIRONMENT_PACKAGES
from veriloop.tasks.importers._bfcl import CATEGORIES as BFCL_CATEGORIES
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
    "BFCL_CATEGORIES",
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
