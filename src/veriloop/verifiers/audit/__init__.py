"""The red-team audit of a task set's verifiers: a catalogue of reward-hacking responses, one or
more per threat category and adapted to each verifier kind (``_exploits``, with the adapters for
text and code kinds), and ``audit_tasks``, which checks that gold answers pass every time while
exploits and mutated gold answers do not. Importing ``_audit`` registers the exploit adapters.
"""

__all__: list[str] = []
