"""The ``openenv`` kind: episodes on OpenEnv environments (``_openenv``), over the session
protocol of their servers (``_protocol``). Importing ``_openenv`` registers the kind;
``veriloop.verifiers`` exports the public names."""

__all__: list[str] = []
