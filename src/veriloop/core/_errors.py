"""Error types shared by every layer.

A ``UserError`` is a problem the user can fix (a bad file, a bad config, a missing model);
the command line prints it in one line without a traceback and exits 2. Everything else is
a bug and keeps its traceback.
"""

from __future__ import annotations

from collections.abc import Sequence


class UserError(Exception):
    """A problem in the user's input, reported as one line (or one line per problem)."""

    exit_code = 2

    def lines(self) -> list[str]:
        """The message as printable lines."""
        return [str(self)]


class RowErrors(UserError):
    """Every bad row of one input file, each as ``FILE: line N: what is wrong``."""

    def __init__(self, errors: Sequence[str]):
        self.errors = list(errors)
        super().__init__("\n".join(self.errors))

    def lines(self) -> list[str]:
        return list(self.errors)


class UnknownNameError(UserError):
    """A name that is not in a registry; the message lists the known names."""
