"""Verifier kinds that judge an episode's final workspace: ``workspace_tests`` (hidden tests
run on it in the task's environment) and ``workspace_checks`` (files and commands)."""

__all__: list[str] = []
