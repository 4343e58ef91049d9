"""JSONL and Parquet readers/writers for records.

Readers check every row and report all bad rows at once as ``FILE: line N: what is wrong``
(for Parquet, N is the 1-based row number). Writers never leave a half-written file: they
write a temporary file beside the target and rename it into place.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any, TypeVar

from pydantic import BaseModel, ValidationError

from veriloop.core._errors import RowErrors, UserError

M = TypeVar("M", bound=BaseModel)

_JSON_COLUMNS_KEY = b"veriloop.json_columns"


def _file_mode() -> int:
    """What ``open`` would give a new file: 0o666 less the umask (mkstemp's 0o600 ignores it)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except OSError:
        pass
    current = os.umask(0o022)  # no /proc: read it by setting it (briefly process-wide)
    os.umask(current)
    return 0o666 & ~current


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike[str], mode: str = "w") -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path``; on success fsync and rename it over ``path``.

    The file gets the mode a plain ``open`` would give it (the umask is respected). On an exception the temporary file is removed and ``path`` is left as it was.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.fchmod(fd, _file_mode())
        encoding = None if "b" in mode else "utf-8"
        with os.fdopen(fd, mode, encoding=encoding) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise


def describe_validation_error(error: ValidationError, prefix: str = "") -> str:
    """One line naming each failing field: ``missing field 'domain'; field 'id': ...``.

    ``prefix`` is put before every field path (``"verifier."`` for a nested object).
    """
    parts = []
    for item in error.errors():
        where = prefix + ".".join(str(p) for p in item["loc"])
        if item["type"] == "missing":
            parts.append(f"missing field '{where}'")
        elif item["type"] == "extra_forbidden":
            parts.append(f"unknown field '{where}'")
        elif where:
            message = str(item["msg"]).removeprefix("Value error, ")
            parts.append(f"field '{where}': {message}")
        else:
            parts.append(str(item["msg"]))
    return "; ".join(dict.fromkeys(parts))


def _open_input(path: Path) -> None:
    if not path.exists():
        raise UserError(f"{path}: no such file")
    if path.is_dir():
        raise UserError(f"{path}: is a directory, expected a file")


def iter_jsonl_objects(path: str | os.PathLike[str]) -> Iterator[tuple[int, Any, str | None]]:
    """Yield ``(line_number, object, error)`` for each non-blank line.

    ``error`` is a message when the line is not a JSON object (then ``object`` is None).
    """
    source = Path(path)
    _open_input(source)
    with source.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]  # a byte-order mark, as some editors write: not part of the first row
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield number, None, f"not valid UTF-8 ({exc.reason} at byte {exc.start})"
                continue
            if not text.strip():
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as exc:
                yield number, None, f"malformed JSON: {exc.msg} (column {exc.colno})"
                continue
            if not isinstance(obj, dict):
                yield number, None, f"expected a JSON object, got {type(obj).__name__}"
                continue
            yield number, obj, None


def read_parquet_rows(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Rows of a Parquet file as dicts, with JSON-encoded columns decoded again."""
    import pyarrow.parquet as pq

    source = Path(path)
    _open_input(source)
    try:
        table = pq.read_table(source)
    except Exception as exc:  # pyarrow raises several types for unreadable files
        raise UserError(f"{source}: not a readable Parquet file ({exc})") from None
    meta = table.schema.metadata or {}
    json_columns = set(json.loads(meta.get(_JSON_COLUMNS_KEY, b"[]")))
    rows = table.to_pylist()
    for row in rows:
        for column in json_columns:
            if isinstance(row.get(column), str):
                row[column] = json.loads(row[column])
    return rows


def iter_objects(path: str | os.PathLike[str]) -> Iterator[tuple[int, Any, str | None]]:
    """Like ``iter_jsonl_objects`` for ``.jsonl``/``.json``; Parquet rows for ``.parquet``."""
    if Path(path).suffix == ".parquet":
        for number, row in enumerate(read_parquet_rows(path), start=1):
            yield number, row, None
    else:
        yield from iter_jsonl_objects(path)


def read_records(path: str | os.PathLike[str], model: type[M]) -> list[M]:
    """Read every row of a JSONL or Parquet file as ``model``; raise RowErrors listing all bad rows."""
    records: list[M] = []
    errors: list[str] = []
    for number, obj, error in iter_objects(path):
        if error is None:
            try:
                records.append(model.model_validate(obj))
                continue
            except ValidationError as exc:
                error = describe_validation_error(exc)
        errors.append(f"{path}: line {number}: {error}")
    if errors:
        raise RowErrors(errors)
    return records


def _as_dict(row: BaseModel | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(row, BaseModel):
        return row.model_dump(mode="json")
    return dict(row)


def write_jsonl(path: str | os.PathLike[str], rows: Iterable[BaseModel | Mapping[str, Any]]) -> int:
    """Write rows as JSON lines, atomically. Returns the number of rows written."""
    count = 0
    with atomic_write(path) as handle:
        for row in rows:
            handle.write(json.dumps(_as_dict(row), ensure_ascii=False) + "\n")
            count += 1
    return count


def _needs_json(values: list[Any]) -> bool:
    """Nested mappings (or lists of them) have no stable Parquet type: store them as JSON text."""
    for value in values:
        if isinstance(value, dict):
            return True
        if isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
            return True
    return False


def write_parquet(path: str | os.PathLike[str], rows: Iterable[BaseModel | Mapping[str, Any]]) -> int:
    """Write rows as one Parquet table, atomically. Returns the number of rows written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    dicts = [_as_dict(row) for row in rows]
    columns: dict[str, list[Any]] = {}
    for index, row in enumerate(dicts):
        for key in row:
            columns.setdefault(key, [None] * index)
        for key, values in columns.items():
            values.append(row.get(key))
    json_columns = sorted(k for k, v in columns.items() if _needs_json(v))
    for key in json_columns:
        columns[key] = [None if v is None else json.dumps(v, ensure_ascii=False) for v in columns[key]]
    table = pa.table(columns) if columns else pa.table({})
    table = table.replace_schema_metadata({_JSON_COLUMNS_KEY: json.dumps(json_columns).encode()})
    with atomic_write(path, "wb") as handle:
        pq.write_table(table, handle)
    return len(dicts)


def write_records(path: str | os.PathLike[str], rows: Iterable[BaseModel | Mapping[str, Any]]) -> int:
    """Write JSONL or Parquet, chosen by the file's suffix."""
    if Path(path).suffix == ".parquet":
        return write_parquet(path, rows)
    return write_jsonl(path, rows)
