"""The ``cad_geometry`` kind: a script that builds a 3D model, run in the sandbox on the CAD
environment, its exported mesh measured there (``in_environment/_measure.py``) and judged on the
host against the task's gold model."""

__all__: list[str] = []
