"""Modules whose source runs inside the sandbox on an environment's interpreter: the standard
library and that environment's packages (``verifiers``), never veriloop itself."""

__all__: list[str] = []
