"""Reading the judge's verdict, strictly: its reply must end with one ``SCORE KEY: n`` line per
key of the prompt, in the prompt's order, and nothing after them.

Only those last lines are read. The keys are drawn after the answer was written
(``_prompt``), so a verdict line the answer wrote for itself, or one that a judge echoed from
the answer, never matches. Anything else (a missing, extra, reordered or repeated line, a
number off the scale, a reply that trails on) is ``MalformedVerdict``: the judge failed, not the
answer, so the check retries and in the end reports an infra error, never a reward of 0.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

_LINE = re.compile(r"SCORE ([0-9a-f]+(?: [0-9]+)?): (-?[0-9]+(?:\.[0-9]+)?)")


class MalformedVerdict(ValueError):
    """The judge's reply does not end with the verdict lines its prompt asked for."""


def read_verdict(reply: str, keys: Sequence[str], scale_min: float, scale_max: float) -> tuple[float, ...]:
    """The score given for each of ``keys``, in order, read from the last ``len(keys)`` non-empty
    lines of ``reply``; raises ``MalformedVerdict`` when they are not exactly the verdict lines."""
    lines = [line.strip() for line in reply.splitlines() if line.strip()]
    if len(lines) < len(keys):
        raise MalformedVerdict(f"the reply has {len(lines)} non-empty lines, fewer than the {len(keys)} verdict lines")
    scores = []
    for key, line in zip(keys, lines[len(lines) - len(keys) :]):
        match = _LINE.fullmatch(line)
        if match is None:
            raise MalformedVerdict(f"expected the line 'SCORE {key}: <number>', got {line[:120]!r}")
        if match.group(1) != key:
            raise MalformedVerdict(f"expected the line 'SCORE {key}: <number>', got one for {match.group(1)!r}")
        value = float(match.group(2))
        if not (math.isfinite(value) and scale_min <= value <= scale_max):
            raise MalformedVerdict(f"score {match.group(2)} for {key} is off the scale {scale_min:g}..{scale_max:g}")
        scores.append(value)
    return tuple(scores)
