"""Seeded task generators: each module registers one generator with
``veriloop.tasks.register_generator`` when imported, under the name ``veriloop tasks generate``
takes. A generator's domain model sits beside it (``_financial_statements`` for
``financial-docs``, the ``_terminal_*`` themes for ``terminal-repos``, ``_numeric_tables``'
company names). Importing this package registers every generator, in the order below; the
generators build on ``veriloop.tasks._sources`` and nothing here imports the importers.
"""

from veriloop.tasks.generators import _arithmetic, _kept_constraints, _numeric_tables  # noqa: F401
from veriloop.tasks.generators import _code_functions, _tool_arithmetic, _word_problems  # noqa: F401  (seed-loop domains)
from veriloop.tasks.generators import _terminal_repos  # noqa: F401  (terminal-repos)
from veriloop.tasks.generators import _financial_docs  # noqa: F401  (financial-docs)
from veriloop.tasks.generators import _cad_parts  # noqa: F401  (cad)

__all__: list[str] = []
