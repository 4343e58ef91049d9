"""One regular-expression match; runs inside a killable check process (``_check_pool.py``, ``_text.py``).

Python's ``re`` holds the GIL for a whole match and cannot be interrupted from another thread,
and a pattern with nested quantifiers (``(a+)+$``) backtracks exponentially on a crafted text.
So the match runs here, in a process the pool kills when the check's time limit passes.
Requests and replies are plain data.
"""

from __future__ import annotations

import functools
import re
from typing import Any


@functools.lru_cache(maxsize=512)
def _compiled(pattern: str, flags: int) -> re.Pattern[str]:
    return re.compile(pattern, flags)


def match_regex(request: dict[str, Any]) -> dict[str, Any]:
    """``request``: ``pattern``, ``flags`` (an ``re`` flag integer), ``text`` and ``mode``
    (``"fullmatch"`` or ``"search"``). Reply: ``{"matched": bool}``."""
    compiled = _compiled(request["pattern"], int(request["flags"]))
    text = request["text"]
    found = compiled.fullmatch(text) if request["mode"] == "fullmatch" else compiled.search(text)
    return {"matched": found is not None}


def search_patterns(request: dict[str, Any]) -> dict[str, Any]:
    """``request``: ``patterns`` (a list), ``flags`` and ``text``. Reply: ``{"found": text}``, the
    first match of the first pattern that matches (stripped, at most 200 characters), or
    ``{"found": None}``."""
    text = request["text"]
    for pattern in request["patterns"]:
        match = _compiled(pattern, int(request["flags"])).search(text)
        if match:
            return {"found": match.group(0).strip()[:200]}
    return {"found": None}
