"""Modules whose source runs inside the sandbox on a final workspace: standard library only
(``tests/verifiers/test_sandboxed_stdlib.py`` fails on anything else)."""

__all__: list[str] = []
