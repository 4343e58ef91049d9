"""Layer 6: the ``veriloop`` command. The only place that prints user errors."""

from veriloop.cli._main import app, main

__all__ = ["app", "main"]
