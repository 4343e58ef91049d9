"""Registries of plain callables, keyed by name (verifier kinds, estimators, backends, ...)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from veriloop.core._errors import UnknownNameError

T = TypeVar("T")


class Registry(Generic[T]):
    """A name -> object mapping whose misses name every known entry.

    ``what`` is the noun used in error messages ("verifier kind", "advantage estimator").
    """

    def __init__(self, what: str):
        self.what = what
        self._entries: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator form: ``@REGISTRY.register("name")``."""

        def add(obj: T) -> T:
            self.add(name, obj)
            return obj

        return add

    def add(self, name: str, obj: T) -> None:
        if name in self._entries:
            raise ValueError(f"{self.what} {name!r} is already registered")
        self._entries[name] = obj

    def get(self, name: str) -> T:
        try:
            return self._entries[name]
        except KeyError:
            raise UnknownNameError(
                f"unknown {self.what} {name!r}; known: {', '.join(self.names()) or '(none)'}"
            ) from None

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)
