"""veriloop: reinforcement learning from verifiable rewards, with an evaluation loop.

The package is layered (see docs/architecture.md); import the subpackage you need, e.g.
``from veriloop.core import Task``. Nothing heavy is imported here so that the command line
starts fast.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
