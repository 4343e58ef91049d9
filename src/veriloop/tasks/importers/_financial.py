"""The ``financial-docs`` importer: users' own documents and gold figures, as ``document_fields`` tasks.

One JSONL (or Parquet) row per document:

    {"id": "acme-2024",                             optional (default: the line number)
     "document": "...text...",                      or "document_file": "acme-2024.md"
     "questions": {"revenue_fy2024": "Revenue for FY2024, in EUR thousands."},
     "gold": {"revenue_fy2024": 182340},            a number for every question
     "units": {"revenue_fy2024": "thousands"},      optional, per field
     "tolerances": {"revenue_fy2024": {"abs_tol": 0.5}},      optional, per field
     "identities": [{"total": "...", "parts": ["...", "-..."]}]}   optional cross-checks

``document_file`` is read relative to the JSONL file's folder and must stay inside it. The
prompt is the document, the questions and the answer format the generator uses; every bad row
is reported with its line number, and nothing is written when any is bad.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from veriloop.core import Task
from veriloop.tasks.generators._financial_docs import ANSWER_FORMAT
from veriloop.tasks.importers._rows import tasks_from_rows
from veriloop.tasks._sources import SourceOptions, register_importer

_MAX_DOCUMENT_BYTES = 2_000_000


class FinancialDocsImportOptions(SourceOptions):
    file: Path = Field(description="JSONL or Parquet file of documents with questions and gold figures")
    name: str | None = Field(default=None, description="task id prefix (default: the file's stem)")
    domain: str = Field(default="financial_docs", description="domain of every task")
    rel_tol: float = Field(default=1e-4, ge=0, description="relative tolerance of fields without their own")
    abs_tol: float = Field(default=0.0, ge=0, description="absolute tolerance of fields without their own")


def _document(row: dict[str, Any], folder: Path) -> str:
    text, file = row.get("document"), row.get("document_file")
    if (text is None) == (file is None):
        raise ValueError("give exactly one of 'document' (the text) and 'document_file' (a path)")
    if text is not None:
        if not isinstance(text, str) or not text.strip():
            raise ValueError("field 'document' must be non-empty text")
        return text
    if not isinstance(file, str) or not file:
        raise ValueError("field 'document_file' must be a path")
    path = (folder / file).resolve()
    if not path.is_relative_to(folder.resolve()):
        raise ValueError(f"document_file {file!r} is outside the folder of the task file")
    if not path.is_file():
        raise ValueError(f"document_file {file!r} not found (looked for {path})")
    if path.stat().st_size > _MAX_DOCUMENT_BYTES:
        raise ValueError(f"document_file {file!r} is larger than {_MAX_DOCUMENT_BYTES:,} bytes")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"document_file {file!r} is not UTF-8 text") from None


def _questions(row: dict[str, Any]) -> dict[str, str]:
    questions, gold = row.get("questions"), row.get("gold")
    if not isinstance(questions, dict) or not questions:
        raise ValueError("field 'questions' must map each field name to its question")
    if not isinstance(gold, dict):
        raise ValueError("field 'gold' must map each field name to its number")
    if not all(isinstance(text, str) and text.strip() for text in questions.values()):
        raise ValueError("every question in 'questions' must be non-empty text")
    missing, extra = sorted(set(questions) - set(gold)), sorted(set(gold) - set(questions))
    if missing or extra:
        parts = ([f"no gold for {', '.join(missing)}"] if missing else []) + (
            [f"gold without a question: {', '.join(extra)}"] if extra else []
        )
        raise ValueError("; ".join(parts))
    return questions


def document_prompt(document: str, questions: dict[str, str]) -> str:
    """The prompt of a document task: the document, the fields to extract, the answer format."""
    asked = "\n".join(f"- {name}: {text}" for name, text in questions.items())
    return f"{document.rstrip()}\n\nExtract these figures:\n{asked}\n\n{ANSWER_FORMAT}"


def _task(row: dict[str, Any], number: int, folder: Path, options: FinancialDocsImportOptions) -> dict[str, Any]:
    document = _document(row, folder)
    questions = _questions(row)
    verifier: dict[str, Any] = {"kind": "document_fields", "rel_tol": options.rel_tol, "abs_tol": options.abs_tol}
    for key in ("units", "tolerances", "identities"):
        if row.get(key) is not None:
            verifier[key] = row[key]
    row_id = row.get("id", number)
    return {
        "id": f"{options.name or options.file.stem}/{row_id}",
        "domain": options.domain,
        "prompt": document_prompt(document, questions),
        "verifier": verifier,
        "gold": row["gold"],
        "metadata": {"source": options.file.name, "line": number, "fields": len(questions)},
    }


@register_importer("financial-docs", FinancialDocsImportOptions, argument="file")
def import_financial_docs(options: FinancialDocsImportOptions) -> list[Task]:
    """Your own documents with questions and gold figures, checked by ``document_fields``."""
    folder = options.file.parent
    return tasks_from_rows(options.file, lambda row, number: _task(row, number, folder, options))
