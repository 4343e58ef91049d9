"""Layer 0: the records every layer exchanges, the error types, registries and record I/O."""

from veriloop.core._blas import BlasMode, blas_mode, ensure_strict_blas
from veriloop.core._errors import RowErrors, UnknownNameError, UserError
from veriloop.core._io import (
    atomic_write,
    describe_validation_error,
    iter_jsonl_objects,
    iter_objects,
    read_parquet_rows,
    read_records,
    write_jsonl,
    write_parquet,
    write_records,
)
from veriloop.core._plugins import ENTRY_POINT_GROUP, PLUGINS_ENV, load_plugins, resolve_plugin
from veriloop.core._records import (
    ExecResult,
    ExecStatus,
    Message,
    Record,
    Response,
    Score,
    Snapshot,
    StopReason,
    Task,
    Trajectory,
    Turn,
)
from veriloop.core._registry import Registry
from veriloop.core._workspace import (
    WorkspaceError,
    inline_files,
    inline_form,
    snapshot_archive,
    workspace_files,
    workspace_path,
)

__all__ = [
    "BlasMode",
    "ENTRY_POINT_GROUP",
    "ExecResult",
    "ExecStatus",
    "Message",
    "PLUGINS_ENV",
    "Record",
    "Registry",
    "Response",
    "RowErrors",
    "Score",
    "Snapshot",
    "StopReason",
    "Task",
    "Trajectory",
    "Turn",
    "UnknownNameError",
    "UserError",
    "WorkspaceError",
    "atomic_write",
    "blas_mode",
    "describe_validation_error",
    "ensure_strict_blas",
    "inline_files",
    "inline_form",
    "iter_jsonl_objects",
    "iter_objects",
    "load_plugins",
    "read_parquet_rows",
    "read_records",
    "resolve_plugin",
    "snapshot_archive",
    "workspace_files",
    "workspace_path",
    "write_jsonl",
    "write_parquet",
    "write_records",
]
