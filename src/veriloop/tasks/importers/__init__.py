"""Task importers: each module registers one or more importers with
``veriloop.tasks.register_importer`` when imported, under the names ``veriloop tasks import``
takes (``reasoning-gym``, ``jsonl``, ``verl-parquet``, ``humaneval``, ``terminal-jsonl``,
``financial-docs``, ``harbor``, ``bfcl``, ``verifiers``, ``openenv``). ``_rows`` turns rows of a user's file into checked tasks, reporting every
bad row with its line number; the file importers build on it. The ``financial-docs`` importer
asks for answers in its generator's format (``generators._financial_docs.ANSWER_FORMAT``).
``harbor`` reads Harbor task folders, their Dockerfiles through ``_dockerfile``. ``verifiers``
loads a PrimeIntellect verifiers taskset inside the sandbox, on an environment that holds it;
``openenv`` makes one task per reset seed of a running OpenEnv environment server.
Importing this package registers every importer, in the order below.
"""

from veriloop.tasks.importers import _reasoning_gym, _rows  # noqa: F401
from veriloop.tasks.importers import _humaneval  # noqa: F401
from veriloop.tasks.importers import _terminal  # noqa: F401  (terminal-jsonl)
from veriloop.tasks.importers import _financial  # noqa: F401  (financial-docs)
from veriloop.tasks.importers import _harbor  # noqa: F401  (harbor)
from veriloop.tasks.importers import _bfcl  # noqa: F401  (bfcl)
from veriloop.tasks.importers import _verifiers  # noqa: F401  (verifiers)
from veriloop.tasks.importers import _openenv  # noqa: F401  (openenv)

__all__: list[str] = []
