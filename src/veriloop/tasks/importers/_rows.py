"""Importers of question/answer rows: plain JSONL (GSM8K style) and verl's Parquet schema.

``jsonl``: one JSON object per line with a question and an answer field. An answer holding
GSM8K's ``#### 72`` marker keeps only the text after the last marker.

``verl-parquet``: verl's RL data schema, one row per prompt: ``data_source``, ``prompt`` (chat
messages), ``ability``, ``reward_model.ground_truth`` and optional ``extra_info``. The
verifier of each row is chosen by its data source (``verifiers``), default ``math``.

Every bad row is reported with its line (or row) number; nothing is written when any is bad.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, field_validator

from veriloop.core import Message, RowErrors, Task, describe_validation_error, iter_objects
from veriloop.tasks._sources import SourceOptions, register_importer


def _verifier_object(value: Any) -> Any:
    """A verifier given as a kind name (``math``) or as JSON text becomes a verifier object."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("{"):
            try:
                return json.loads(text)
            except ValueError as exc:
                raise ValueError(f"not a JSON object: {exc}") from None
        return {"kind": text}
    return value


def _verifier_map(value: Any) -> Any:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise ValueError(f"not a JSON object: {exc}") from None
    if isinstance(value, dict):
        return {source: _verifier_object(v) for source, v in value.items()}
    return value


class JsonlOptions(SourceOptions):
    file: Path = Field(description="JSONL file of question/answer rows")
    question_field: str = Field(default="question", description="field holding the question")
    answer_field: str = Field(default="answer", description="field holding the answer")
    id_field: str | None = Field(default=None, description="field holding a row id (default: line number)")
    answer_marker: str | None = Field(default="####", description="keep only the answer text after this marker")
    name: str | None = Field(default=None, description="task id prefix (default: the file's stem)")
    domain: str = Field(default="math", description="domain of every task")
    verifier: dict[str, Any] = Field(default={"kind": "math"}, description="verifier kind name or JSON object")
    instruction: str = Field(default="", description="text appended to each question")

    @field_validator("verifier", mode="before")
    @classmethod
    def _verifier(cls, value: Any) -> Any:
        return _verifier_object(value)


def tasks_from_rows(path: Path, to_task: Callable[[dict[str, Any], int], dict[str, Any]]) -> list[Task]:
    """Tasks built by ``to_task(row, line_number)`` for every row of a JSONL or Parquet file.

    ``to_task`` returns the task's fields or raises ValueError saying what is wrong with the
    row. Every bad row, malformed line, invalid task or duplicate id is collected and raised
    as one RowErrors (``FILE: line N: ...``).
    """
    from veriloop.tasks._validate import check_task

    built: list[Task] = []
    errors: list[str] = []
    first: dict[str, int] = {}
    for number, row, error in iter_objects(path):
        where = f"{path}: line {number}"
        try:
            if error is not None:
                raise ValueError(error)
            task = Task.model_validate(to_task(row, number))
        except ValidationError as exc:
            errors.append(f"{where}: {describe_validation_error(exc)}")
            continue
        except ValueError as exc:
            errors.append(f"{where}: {exc}")
            continue
        problem = check_task(task)
        if problem is None and task.id in first:
            problem = f"duplicate id {task.id!r} (first on line {first[task.id]})"
        if problem is not None:
            errors.append(f"{where}: {problem}")
            continue
        first[task.id] = number
        built.append(task)
    if errors:
        raise RowErrors(errors)
    return built


def _gold_text(answer: Any, marker: str | None) -> str:
    text = str(answer).strip()
    if marker and marker in text:
        text = text.rsplit(marker, 1)[1].strip()
    return text


def _jsonl_task(row: dict[str, Any], number: int, options: JsonlOptions) -> dict[str, Any]:
    question, answer = row.get(options.question_field), row.get(options.answer_field)
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"field '{options.question_field}' must be a non-empty string")
    if answer is None or isinstance(answer, (dict, list)):
        raise ValueError(f"field '{options.answer_field}' must be a string or number")
    row_id = row.get(options.id_field) if options.id_field else number
    if row_id is None:
        raise ValueError(f"missing field '{options.id_field}'")
    return {
        "id": f"{options.name or options.file.stem}/{row_id}",
        "domain": options.domain,
        "prompt": f"{question}\n\n{options.instruction}" if options.instruction else question,
        "verifier": options.verifier,
        "gold": _gold_text(answer, options.answer_marker),
        "metadata": {"source": str(options.file.name), "line": number},
    }


@register_importer("jsonl", JsonlOptions, argument="file")
def import_jsonl(options: JsonlOptions) -> list[Task]:
    """Question/answer rows from a JSONL file (GSM8K style: '#### 72' answers are understood)."""
    return tasks_from_rows(options.file, lambda row, number: _jsonl_task(row, number, options))


class VerlParquetOptions(SourceOptions):
    file: Path = Field(description="verl dataset file (.parquet, or .jsonl with the same columns)")
    verifiers: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description='verifier per data_source, as JSON: {"openai/gsm8k": "math"}'
    )
    default_verifier: dict[str, Any] = Field(
        default={"kind": "math"}, description="verifier of data sources not in --verifiers"
    )
    domain: str | None = Field(default=None, description="domain of every task (default: the row's ability)")

    @field_validator("verifiers", mode="before")
    @classmethod
    def _map(cls, value: Any) -> Any:
        return _verifier_map(value)

    @field_validator("default_verifier", mode="before")
    @classmethod
    def _default(cls, value: Any) -> Any:
        return _verifier_object(value)


def _verl_prompt(prompt: Any) -> Any:
    if isinstance(prompt, str):
        return prompt
    if hasattr(prompt, "tolist"):  # numpy arrays from some Parquet readers
        prompt = prompt.tolist()
    if not isinstance(prompt, (list, tuple)):
        raise ValueError("prompt must be text or a list of chat messages")
    messages = []
    for index, message in enumerate(prompt):
        try:
            messages.append(Message.model_validate(message).model_dump())
        except ValidationError as exc:
            raise ValueError(describe_validation_error(exc, f"prompt.{index}.")) from None
    return messages


def _verl_task(row: dict[str, Any], number: int, options: VerlParquetOptions) -> dict[str, Any]:
    source = row.get("data_source")
    if not isinstance(source, str) or not source:
        raise ValueError("missing field 'data_source'")
    reward_model = row.get("reward_model")
    if not isinstance(reward_model, dict) or "ground_truth" not in reward_model:
        raise ValueError("missing field 'reward_model.ground_truth'")
    extra = row.get("extra_info") if isinstance(row.get("extra_info"), dict) else {}
    index = extra.get("index", number - 1)
    split = extra.get("split")
    ground_truth = reward_model["ground_truth"]
    if hasattr(ground_truth, "tolist"):
        ground_truth = ground_truth.tolist()
    return {
        "id": f"{source}/{split + '/' if isinstance(split, str) else ''}{index}",
        "domain": options.domain or row.get("ability") or source,
        "prompt": _verl_prompt(row.get("prompt")),
        "verifier": options.verifiers.get(source, options.default_verifier),
        "gold": ground_truth,
        "metadata": {
            "data_source": source,
            "ability": row.get("ability"),
            "extra_info": extra,
            "reward_style": reward_model.get("style"),
        },
    }


@register_importer("verl-parquet", VerlParquetOptions, argument="file")
def import_verl_parquet(options: VerlParquetOptions) -> list[Task]:
    """verl's RL data schema (data_source, prompt, ability, reward_model.ground_truth)."""
    return tasks_from_rows(options.file, lambda row, number: _verl_task(row, number, options))
