"""The template repositories the ``terminal-repos`` generator draws from, as data.

A theme is a small package written as ``string.Template`` text. Each *unit* (one top-level
function, class or constant) names its own identifier by a slot (``$find_item``); the seed
picks the identifier from ``names``, the module it lives in from ``Unit.homes``, and the
numbers and words of the tests from ``draw``. In package code ``$slot`` is the bare name (the
generator adds the imports); in tests it is the qualified ``module.name`` and ``$m_<module>``
is a module. Test helpers (``helpers``) are added to every test file that calls them.

What each unit carries for the three difficulties: ``bugs`` (one-line defects its ``visible``
test catches), ``returns`` (it can be asked to return a ``(value, unit)`` tuple), and the
theme's ``misuses`` (a caller breaking a helper's documented contract). Templates are ASCII:
the generator edits them by AST positions, which count UTF-8 bytes.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Bug:
    """A one-line defect: ``correct`` (text of the unit's template) becomes ``wrong``."""

    correct: str
    wrong: str
    kind: str


@dataclass(frozen=True)
class Misuse:
    """A caller that breaks the documented contract of a helper in another module.

    ``wrong`` is ``(correct, defective)`` text of the caller's template; ``decoy`` is
    ``(correct, patched)`` text of the helper's template: the tempting fix that makes the
    caller's test pass and breaks the helper's other callers.
    """

    caller: str
    helper: str
    wrong: tuple[str, str]
    decoy: tuple[str, str]
    contract: str


@dataclass(frozen=True)
class ValueUnit:
    """How a unit would return ``(value, unit)``: the unit text, a test call and its value."""

    unit: str
    call: str
    value: str


@dataclass(frozen=True)
class Unit:
    """One top-level definition: its slot, the modules it may live in, its source and tests."""

    slot: str
    homes: tuple[str, ...]
    source: str
    tests: str = ""
    visible: str = ""
    imports: tuple[str, ...] = ()  # standard library: "math" or "dataclasses.replace"
    bugs: tuple[Bug, ...] = ()
    returns: ValueUnit | None = None

    @property
    def is_function(self) -> bool:
        return self.source.lstrip().startswith("def ")


@dataclass(frozen=True)
class Module:
    """A module slot: the names it may take and its docstring."""

    slot: str
    names: tuple[str, ...]
    doc: str


@dataclass(frozen=True)
class Theme:
    """A template package. ``modules`` are in import order: a unit uses only units of its own
    module or of earlier ones."""

    name: str
    packages: tuple[str, ...]
    doc: str
    modules: tuple[Module, ...]
    names: Mapping[str, tuple[str, ...]]
    draw: Callable[[random.Random], dict[str, object]]
    units: tuple[Unit, ...]
    misuses: tuple[Misuse, ...]
    helpers: Mapping[str, str] = field(default_factory=dict)


def distinct(rng: random.Random, count: int, low: int, high: int) -> list[int]:
    """``count`` distinct integers in ``low..high``, ascending."""
    return sorted(rng.sample(range(low, high + 1), count))


def money_text(cents: int) -> str:
    """Cents as currency text with two decimals: -5 -> '-0.05'."""
    return f"{'-' if cents < 0 else ''}{abs(cents) // 100}.{abs(cents) % 100:02d}"
