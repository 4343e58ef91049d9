"""The ``judge`` kind: rewards given by a judge model against a rubric (``_judge``), the prompt
that quotes the answer as data (``_prompt``), the strict reading of its verdict (``_verdict``),
the fields (``_config``) and the backends that reach the judge (``_backends``). Importing
``_judge`` registers the kind; ``veriloop.verifiers`` exports the public names."""

__all__: list[str] = []
