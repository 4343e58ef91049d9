import pytest

from veriloop.core import Task


def make_tasks(domain: str, count: int, start: int = 0, pattern: str = r"\d") -> list[Task]:
    """``count`` regex tasks of one domain (ids unique per domain and ``start``)."""
    return [
        Task(
            id=f"{domain}/{i}",
            domain=domain,
            prompt=f"Write a digit, {i}.",
            verifier={"kind": "regex", "pattern": pattern, "mode": "search"},
        )
        for i in range(start, start + count)
    ]


@pytest.fixture
def three_domains() -> list[Task]:
    return make_tasks("small", 7) + make_tasks("large", 300) + make_tasks("mid", 40)
