"""Free-form ``--name value`` options for commands whose options depend on a registry entry.

``veriloop tasks generate arithmetic --difficulty 3 --operators +-`` passes ``difficulty`` and
``operators`` to the arithmetic generator's own options model, which validates them.
"""

from __future__ import annotations

import json
from typing import Any


def _value(text: str) -> Any:
    """JSON objects and lists are decoded; everything else stays text for the options model."""
    stripped = text.strip()
    if stripped[:1] in ("{", "["):
        try:
            return json.loads(stripped)
        except ValueError:
            return text
    return text


def parse_extra_options(args: list[str]) -> dict[str, Any]:
    """``["--max-operand", "50", "--flag", "--x=1"]`` -> ``{"max_operand": "50", "flag": True, "x": "1"}``.

    Raises UserError for a stray positional argument or a repeated option.
    """
    from veriloop.core import UserError

    options: dict[str, Any] = {}
    index = 0
    while index < len(args):
        token = args[index]
        if not token.startswith("--") or token == "--":
            raise UserError(f"unexpected argument {token!r}; options look like --name value")
        name, has_value, value = token[2:].partition("=")
        if not has_value:
            following = args[index + 1] if index + 1 < len(args) else None
            if following is None or (following.startswith("--") and len(following) > 2):
                value = "true"
            else:
                value = following
                index += 1
        key = name.replace("-", "_")
        if key in options:
            raise UserError(f"option --{name} given twice")
        options[key] = _value(value)
        index += 1
    return options
