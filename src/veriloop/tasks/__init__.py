"""Layer 2: task sets: loading and checking them (importers and generators build on this)."""

from veriloop.tasks._validate import TaskSetCheck, check_task, check_task_file, load_tasks

__all__ = ["TaskSetCheck", "check_task", "check_task_file", "load_tasks"]
