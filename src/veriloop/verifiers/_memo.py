"""A small thread-safe least-recently-used cache for per-task grading artefacts.

RL verifies the same task many times (a group of samples per prompt, then again each
epoch); what depends only on the task (the inputs its tests use, the reference's outputs on
dynamic inputs) is computed once per process. Failures are not cached.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")


class Memo(Generic[T]):
    """A bounded mapping that forgets the least recently used entries; values are never None."""

    def __init__(self, size: int = 4096):
        self.size = size
        self._items: OrderedDict[Hashable, T] = OrderedDict()
        self._lock = threading.Lock()

    def peek(self, key: Hashable) -> T | None:
        """The cached value, or None."""
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        return None

    def put(self, key: Hashable, value: T) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        """The cached value, or ``compute()`` stored under ``key`` (two threads may both compute)."""
        value = self.peek(key)
        if value is None:
            value = compute()
            self.put(key, value)
        return value
