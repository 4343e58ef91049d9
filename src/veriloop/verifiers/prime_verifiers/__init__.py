"""The ``verifiers_taskset`` kind: PrimeIntellect verifiers tasksets, run inside the sandbox on
an environment that holds them (``_taskset``; the program it sends there is
``in_environment/_taskset_runner.py``). Importing ``_taskset`` registers the kind;
``veriloop.verifiers`` exports the public names."""

__all__: list[str] = []
