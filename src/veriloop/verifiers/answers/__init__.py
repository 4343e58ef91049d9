"""Verifier kinds that read an answer out of the response text: exact and regex matches, JSON
against a schema, named numeric values, math equivalence, reasoning-gym scorers and the
``<answer>`` tags they share. Checks that may run without end on hostile input (math-verify,
a generator's own scorer) run in the killable check pool (``_check_pool`` on the host,
``_check_process`` in each process). Importing a module registers its kinds; this package
itself imports nothing, so that ``veriloop.verifiers`` decides the registration order.
"""

__all__: list[str] = []
