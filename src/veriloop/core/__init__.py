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

__all__ = [
    "BlasMode",
    "ExecResult",
    "ExecStatus",
    "Message",
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
    "atomic_write",
    "blas_mode",
    "describe_validation_error",
    "ensure_strict_blas",
    "iter_jsonl_objects",
    "iter_objects",
    "read_parquet_rows",
    "read_records",
    "write_jsonl",
    "write_parquet",
    "write_records",
]
