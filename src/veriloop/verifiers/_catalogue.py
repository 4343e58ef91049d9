"""The verifier kinds as a reference: every kind's fields with their types, defaults and descriptions.

Generated from the registry (plugins included), so ``veriloop verifiers`` and the documentation's verifier page
cannot drift from the code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic.fields import FieldInfo

from veriloop.verifiers._registry import VERIFIERS


@dataclass(frozen=True)
class KindField:
    """One field a task's ``verifier`` object may carry for ``kind``."""

    kind: str
    field: str
    type: str
    default: str  # "required" when the field has none
    description: str


def _type_name(info: FieldInfo) -> str:
    text = str(info.annotation).replace("typing.", "").replace("<class '", "").replace("'>", "")
    return re.sub(r"\b(?:[a-z_]+\.)+([A-Z]\w*)", r"\1", text)  # veriloop.verifiers.x.Case -> Case


def _default(info: FieldInfo) -> str:
    if info.is_required():
        return "required"
    value = info.default_factory() if info.default_factory is not None else info.default  # type: ignore[call-arg]
    return repr(value)


def verifier_fields() -> list[KindField]:
    """Every registered kind's fields, kinds in name order, fields in declaration order."""
    return [
        KindField(name, field, _type_name(info), _default(info), info.description or "")
        for name in VERIFIERS.names()
        for field, info in VERIFIERS.get(name).config.model_fields.items()
    ]


def markdown_table(fields: list[KindField]) -> str:
    """The reference as a Markdown table (the documentation site's verifier page includes it)."""
    rows = ["| kind | field | type | default | description |", "|---|---|---|---|---|"]
    for f in fields:
        cells = [f.kind, f"`{f.field}`", f.type, f"`{f.default}`", f.description]
        rows.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(rows) + "\n"
