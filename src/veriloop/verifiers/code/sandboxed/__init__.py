"""Modules whose source is shipped into the sandbox and run there in a bare interpreter:
standard library only (``tests/verifiers/test_sandboxed_stdlib.py`` fails on anything else).
Imports of sibling modules here are for readers and the host, and end in ``# sandbox: strip``
so that ``code._scripts`` removes them when it concatenates the sources into one script. The
host imports ``_wire`` and ``_channel`` too, to encode inputs and read the result channel.
"""

__all__: list[str] = []
