import json
import os

import pytest

from veriloop.core import (
    Response,
    RowErrors,
    Task,
    Trajectory,
    UserError,
    atomic_write,
    read_records,
    write_jsonl,
    write_parquet,
)


def test_jsonl_round_trip(tmp_path):
    rows = [Response(id=f"r{i}", task_id="t", response=f"answer {i} ✓") for i in range(3)]
    path = tmp_path / "out" / "responses.jsonl"
    assert write_jsonl(path, rows) == 3
    assert read_records(path, Response) == rows


def test_reader_reports_every_bad_row_with_its_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(
        '{"id": "a", "task_id": "t", "response": "ok"}\n'
        "\n"
        '{"id": "b", "task_id": "t", "respo\n'
        "[1, 2]\n"
        '{"id": "c", "response": "no task"}\n'
        '{"id": "d", "task_id": "t", "response": "ok"}\n'
    )
    with pytest.raises(RowErrors) as caught:
        read_records(path, Response)
    lines = caught.value.lines()
    assert len(lines) == 3
    assert lines[0].startswith(f"{path}: line 3: malformed JSON")
    assert lines[1] == f"{path}: line 4: expected a JSON object, got list"
    assert lines[2] == f"{path}: line 5: missing field 'task_id'"


def test_reader_reports_invalid_utf8(tmp_path):
    path = tmp_path / "bin.jsonl"
    path.write_bytes(b'{"id": "a", "task_id": "t", "response": "\xff"}\n')
    with pytest.raises(RowErrors, match="line 1: not valid UTF-8"):
        read_records(path, Response)


def test_missing_file_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="no such file"):
        read_records(tmp_path / "nope.jsonl", Response)


def test_atomic_write_leaves_the_old_file_on_failure(tmp_path):
    path = tmp_path / "keep.txt"
    path.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_write(path) as handle:
            handle.write("half")
            raise RuntimeError("crash mid-write")
    assert path.read_text() == "old"
    assert os.listdir(tmp_path) == ["keep.txt"]


def test_parquet_round_trip_keeps_nested_fields(tmp_path):
    tasks = [
        Task(id="a", domain="math", prompt="1+1?", verifier={"kind": "exact"}, gold="2"),
        Task(
            id="b",
            domain="code",
            prompt=[{"role": "user", "content": "hi"}],
            verifier={"kind": "regex", "pattern": "h.*", "mode": "search"},
            metadata={"source": {"name": "x", "n": 3}},
            difficulty=0.5,
        ),
    ]
    path = tmp_path / "tasks.parquet"
    write_parquet(path, tasks)
    assert read_records(path, Task) == tasks


def test_parquet_keeps_token_lists_native(tmp_path):
    import pyarrow.parquet as pq

    trajectory = Trajectory(
        id="x",
        task_id="t",
        domain="d",
        group_id="g",
        prompt_ids=(1, 2),
        completion_ids=(3, 4),
        logprobs=(-0.5, -0.25),
        loss_mask=(1, 1),
    )
    path = tmp_path / "traj.parquet"
    write_parquet(path, [trajectory])
    schema = pq.read_schema(path)
    import pyarrow as pa

    column_type = schema.field("completion_ids").type
    assert pa.types.is_list(column_type) and column_type.value_type == pa.int64()
    assert read_records(path, Trajectory) == [trajectory]


def test_unreadable_parquet_is_a_user_error(tmp_path):
    path = tmp_path / "broken.parquet"
    path.write_text(json.dumps({"not": "parquet"}))
    with pytest.raises(UserError, match="not a readable Parquet file"):
        read_records(path, Task)


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_atomic_writes_respect_the_umask(tmp_path, umask):
    import os

    from veriloop.core import atomic_write

    previous = os.umask(umask)
    try:
        with atomic_write(tmp_path / f"out-{umask:o}.json") as handle:
            handle.write("{}")
        with open(tmp_path / f"plain-{umask:o}.json", "w") as handle:
            handle.write("{}")
    finally:
        os.umask(previous)
    mode = (tmp_path / f"out-{umask:o}.json").stat().st_mode & 0o777
    assert mode == (tmp_path / f"plain-{umask:o}.json").stat().st_mode & 0o777 == 0o666 & ~umask


def test_one_mistake_on_every_row_is_one_line(tmp_path):
    from veriloop.core import RowErrors

    errors = [f"t.jsonl: line {n}: missing field 'domain'" for n in range(3, 5003)]
    errors += [
        "t.jsonl: line 7000: not JSON",
        "t.jsonl: line 7002: not JSON",
        "u.jsonl: line 3: missing field 'domain'",
    ]
    assert RowErrors(errors).lines() == [
        "t.jsonl: lines 3-5002: missing field 'domain'",
        "t.jsonl: lines 7000, 7002: not JSON",
        "u.jsonl: line 3: missing field 'domain'",
    ]
    scattered = RowErrors([f"t.jsonl: line {2 * n}: bad" for n in range(1, 21)]).lines()
    assert scattered == ["t.jsonl: lines 2, 4, 6, 8, 10, 12, 14, 16 and 12 more: bad"]
    many = RowErrors([f"t.jsonl: line {n}: problem {n}" for n in range(1, 101)]).lines()
    assert len(many) == 51 and many[-1] == "... and 50 more problems"


def test_a_byte_order_mark_is_not_part_of_the_first_row(tmp_path):
    from veriloop.core import iter_jsonl_objects

    path = tmp_path / "bom.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"a": 1}\n{"b": 2}\n')
    assert list(iter_jsonl_objects(path)) == [(1, {"a": 1}, None), (2, {"b": 2}, None)]
