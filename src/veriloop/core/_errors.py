"""Error types shared by every layer.

A ``UserError`` is a problem the user can fix (a bad file, a bad config, a missing model);
the command line prints it in one line without a traceback and exits 2. Everything else is
a bug and keeps its traceback.
"""

from __future__ import annotations

import re
from collections.abc import Sequence


class UserError(Exception):
    """A problem in the user's input, reported as one line (or one line per problem)."""

    exit_code = 2

    def lines(self) -> list[str]:
        """The message as printable lines."""
        return [str(self)]


_ROW = re.compile(r"^(?P<file>.*?): line (?P<line>\d+): (?P<what>.*)$", re.S)
MAX_PROBLEMS = 50  # distinct problems printed; the rest are counted
MAX_RANGES = 8  # line ranges printed for one problem; the rest are counted


class RowErrors(UserError):
    """Every bad row of one input file, each as ``FILE: line N: what is wrong``.

    ``errors`` keeps every row; ``lines`` groups rows with the same problem in the same file
    (``FILE: lines 3-5002: ...``) and caps the list, so one mistake repeated on every row is one line.
    """

    def __init__(self, errors: Sequence[str]):
        self.errors = list(errors)
        super().__init__("\n".join(self.errors))

    def lines(self) -> list[str]:
        groups: dict[tuple[str, str], list[int]] = {}
        for error in self.errors:
            match = _ROW.match(error)
            key = (match["file"], match["what"]) if match else (error, "")
            groups.setdefault(key, []).append(int(match["line"]) if match else -1)
        lines = [_grouped(file, what, numbers) for (file, what), numbers in list(groups.items())[:MAX_PROBLEMS]]
        if len(groups) > MAX_PROBLEMS:
            lines.append(f"... and {len(groups) - MAX_PROBLEMS} more problems")
        return lines


def _grouped(file: str, what: str, numbers: list[int]) -> str:
    if numbers == [-1]:
        return file  # not a row error: the text as it came
    ranges: list[list[int]] = []
    for number in sorted(set(numbers)):
        if ranges and number == ranges[-1][1] + 1:
            ranges[-1][1] = number
        else:
            ranges.append([number, number])
    shown = [f"{a}" if a == b else f"{a}-{b}" for a, b in ranges[:MAX_RANGES]]
    more = sum(b - a + 1 for a, b in ranges[MAX_RANGES:])
    where = ", ".join(shown) + (f" and {more} more" if more else "")
    return f"{file}: {'line' if len(numbers) == 1 else 'lines'} {where}: {what}"


class UnknownNameError(UserError):
    """A name that is not in a registry; the message lists the known names."""
