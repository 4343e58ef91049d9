"""Verifier kinds that judge an episode's final workspace: ``workspace_tests`` (hidden tests
run on it in the task's environment), ``workspace_checks`` (files and commands) and
``reward_script`` (a script that writes the reward, as a Harbor task's ``tests/test.sh`` does)."""

__all__: list[str] = []
