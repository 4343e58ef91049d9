"""JSON Schema validation itself; runs inside a killable check process (``_check_pool.py``, ``_json_schema.py``).

A schema's ``pattern`` and ``patternProperties`` are regular expressions that Python matches
without any time limit, and a crafted string makes a backtracking pattern run for hours; a
huge ``uniqueItems`` array is slow too. So validation runs here, in a process the pool kills
when the check's time limit passes. Requests and replies are plain data; the value travels
as JSON text so that it is decoded exactly as deep as it was on the host.
"""

from __future__ import annotations

import functools
import json
from typing import Any

SHOWN_ERRORS = 3


@functools.lru_cache(maxsize=256)
def _validator(schema_text: str) -> Any:
    from jsonschema import validators

    schema = json.loads(schema_text)
    return validators.validator_for(schema)(schema)


def validate_json(request: dict[str, Any]) -> dict[str, Any]:
    """``request``: ``schema`` (JSON text) and ``value`` (JSON text). Reply: ``{"count": n,
    "errors": [{"path": [...], "message": "..."}, ...]}`` (the first few, by path), or
    ``{"too_deep": true}``."""
    validator = _validator(request["schema"])
    try:
        value = json.loads(request["value"])
        errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    except RecursionError:
        return {"too_deep": True}
    shown = [{"path": list(e.absolute_path), "message": e.message[:200]} for e in errors[:SHOWN_ERRORS]]
    return {"count": len(errors), "errors": shown}
