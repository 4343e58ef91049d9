"""Verifier kind ``reward_script``: a script run on the final workspace writes the reward.

The convention of Harbor task folders (Terminal-Bench 2): after the episode, ``tests/test.sh``
runs in the agent's environment and writes its reward to ``reward.txt`` (one number) or
``reward.json`` (``{"reward": 0.75, ...}``) in a folder of its own. Here:

- the verdict workspace is the final workspace (the response's ``workspace``; the task's
  initial one when it has none) cleaned as ``workspace_tests`` cleans it (bytecode, ``.pth``
  files, planted ``conftest.py``/``sitecustomize.py``/``usercustomize.py``), without anything
  the agent left in a folder that holds hidden files (those folders are the verifier's), and with
  the hidden ``files`` written over it;
- ``command`` runs there, in the sandbox on the task's environment, with ``variables`` set and
  without network, by the runner of ``workspace_tests`` (``sandboxed/_test_runner.py``), which
  makes ``reward_dir`` and empties it of both reward files before the command starts (so nothing
  planted earlier counts), and reads them once every process of the run has ended;
- the reward is ``reward.txt``'s number, else ``reward.json``'s ``"reward"`` (or its only
  number); with no reward file, exit code 0 scores 1 and any other 0 (``exit_code_reward``;
  off, no file scores 0). A reward file that holds no finite number scores 0, saying what it
  holds: the script ran the workspace's code, which may have broken it (``veriloop tasks
  validate`` shows a script broken for every answer, the reference solution's included).
  ``passed`` when the reward reaches ``pass_reward``. Only a run that could not be read back
  (a lost sandbox, a broken runner) is an ``infra_error``.

The script runs the workspace's code in its own processes, so that code can write the reward
file as it likes: the verdict is only as trustworthy as the script's isolation, and its detail
and ``veriloop audit`` say so. What the script prints reaches the detail (for people), never the
feedback (for the model).
"""

from __future__ import annotations

import json
import math
from pathlib import PurePosixPath

from pydantic import Field, field_validator

from veriloop.core import Task
from veriloop.verifiers._registry import GraderError, Verdict, VerifierConfig, register_verifier
from veriloop.verifiers.workspace._workspace_tests import (
    RUNNER_SOURCE,
    final_workspace,
    hidden_files,
    run_in_environment,
    verdict_workspace,
)

REWARD_FROM_THE_CODE = "the reward comes from a script that runs the workspace's code"
_OUTPUT_CHARS = 4000
_SHOWN_OUTPUT = 600


class RewardScriptConfig(VerifierConfig):
    files: dict[str, str] = Field(
        description="hidden files, {path: text}, written over the final workspace (their folders are the verifier's)"
    )
    command: list[str] = Field(description="the script's argv, run in the verdict workspace, e.g. bash /tests/test.sh")
    reward_dir: str = Field(
        description="the folder it writes reward.txt or reward.json to: absolute, or relative to the workspace"
    )
    variables: dict[str, str] = Field(default_factory=dict, description="environment variables the script runs with")
    exit_code_reward: bool = Field(
        default=True, description="with no reward file, exit code 0 scores 1 and others 0 (off: no file scores 0)"
    )
    pass_reward: float = Field(default=1.0, description="the reward at or above which the verdict is passed")
    timeout_s: float = Field(default=600.0, gt=0, le=3600, description="wall-clock limit of the script's run")
    memory_mb: int = Field(default=2048, ge=64, description="memory limit of each process of the run")

    @field_validator("files")
    @classmethod
    def _paths_inside(cls, files: dict[str, str]) -> dict[str, str]:
        return hidden_files(files, "needs at least one hidden file: the script, or what it runs")

    @field_validator("command")
    @classmethod
    def _command_given(cls, command: list[str]) -> list[str]:
        if not command or not all(isinstance(part, str) and part and "\x00" not in part for part in command):
            raise ValueError("needs a command: a non-empty list of non-empty arguments")
        return command

    @field_validator("reward_dir")
    @classmethod
    def _folder(cls, folder: str) -> str:
        if not folder or "\x00" in folder or ".." in PurePosixPath(folder).parts:
            raise ValueError(f"reward_dir {folder!r} must be a folder path without '..'")
        return folder

    @field_validator("variables")
    @classmethod
    def _variables(cls, variables: dict[str, str]) -> dict[str, str]:
        if bad := [name for name in variables if not name.isidentifier() or "\x00" in variables[name]]:
            raise ValueError(f"variable names are letters, digits and '_', values without NUL bytes: {bad}")
        return variables


def hidden_folders(files: dict[str, str]) -> set[str]:
    """The folders that hold hidden files (the workspace's root aside)."""
    return {str(PurePosixPath(path).parent) for path in files} - {"."}


def script_workspace(initial: dict[str, bytes], final: dict[str, bytes], hidden: dict[str, str]):
    """The files the script runs on and the paths left out (see the module's docstring)."""
    folders = hidden_folders(hidden)
    owned = [p for p in final if any(p == f or p.startswith(f + "/") for f in folders)]
    files, removed = verdict_workspace(initial, {p: c for p, c in final.items() if p not in owned}, hidden)
    return files, sorted({*removed, *(p for p in owned if p not in hidden)})


def runner_program(config: RewardScriptConfig) -> str:
    settings = {
        "command": config.command,
        "reward_dir": config.reward_dir,
        "variables": config.variables,
        "test_files": [],
        "trusted": [],
        "hidden": [],
        "scripts": {},
        "timeout_s": config.timeout_s,
        "output_chars": _OUTPUT_CHARS,
    }
    return RUNNER_SOURCE.replace("SETTINGS = {}", f"SETTINGS = json.loads({json.dumps(settings)!r})", 1)


class UnreadableReward(ValueError):
    """A reward file that holds no reward (its message says what it holds)."""


def read_reward(rewards: dict[str, str | None]) -> tuple[float, str] | None:
    """``(reward, file it came from)`` from the reward files' text, or None when neither exists;
    UnreadableReward when the one that counts holds no finite reward."""
    text = rewards.get("reward.txt")
    if text is not None:
        try:
            value = float(text.strip())
        except ValueError:
            raise UnreadableReward(f"reward.txt holds {text.strip()[:80]!r}, not a number") from None
        return _finite(value, "reward.txt"), "reward.txt"
    text = rewards.get("reward.json")
    if text is None:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        raise UnreadableReward(f"reward.json is not JSON: {text.strip()[:80]!r}") from None
    numbers = {k: v for k, v in data.items() if _number(v)} if isinstance(data, dict) else {}
    if "reward" in numbers:
        return _finite(float(numbers["reward"]), "reward.json"), "reward.json"
    if len(numbers) == 1:
        return _finite(float(next(iter(numbers.values()))), "reward.json"), "reward.json"
    raise UnreadableReward(f"reward.json names no 'reward' and holds not one number: {text.strip()[:80]!r}")


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _finite(value: float, source: str) -> float:
    if not math.isfinite(value):
        raise UnreadableReward(f"{source} holds {value}, not a finite reward")
    return value


@register_verifier("reward_script", RewardScriptConfig)
def check_reward_script(config: RewardScriptConfig, task: Task, response: str) -> Verdict:
    """Run the script on the final workspace; reward what it writes (see module docs)."""
    files, removed = script_workspace(task.workspace_files(), final_workspace(task, response), config.files)
    result = run_in_environment(task, runner_program(config), files, config.timeout_s + 15, config.memory_mb)
    note = f" (left out of the run: {', '.join(removed[:5])}{' ...' if len(removed) > 5 else ''})" if removed else ""
    if not result.ok:
        detail = f"the script's run ended: {result.status} {result.detail}".rstrip() + note
        return Verdict(
            0.0, False, detail=detail, feedback="The tests could not finish.", environment=result.environment
        )
    try:
        answer = json.loads(result.stdout.strip().splitlines()[-1])
        rewards, exit_code, output = answer.get("rewards") or {}, answer["exit_code"], answer["output"]
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        raise GraderError(f"the script runner answered {result.stdout[-200:]!r}") from None
    tail = output.strip()[-_SHOWN_OUTPUT:]
    shown = f"; output: {tail}" if tail else ""
    if answer["problem"]:
        detail = f"{answer['problem']}{note}{shown}"
        return Verdict(
            0.0,
            False,
            detail=detail,
            feedback=f"The tests failed: {answer['problem']}.",
            environment=result.environment,
        )
    try:
        found = read_reward(rewards)
    except UnreadableReward as exc:
        detail = f"{exc} (exit code {exit_code}); {REWARD_FROM_THE_CODE}{note}{shown}"
        return Verdict(0.0, False, detail=detail, feedback="The tests wrote no reward.", environment=result.environment)
    if found is None and not config.exit_code_reward:
        detail = (
            f"the script wrote no reward.txt or reward.json in {config.reward_dir} (exit code {exit_code}){note}{shown}"
        )
        return Verdict(0.0, False, detail=detail, feedback="The tests wrote no reward.", environment=result.environment)
    reward, source = found if found is not None else (1.0 if exit_code == 0 else 0.0, "the exit code")
    passed = reward >= config.pass_reward
    detail = f"reward {reward:g} from {source} (exit code {exit_code}); {REWARD_FROM_THE_CODE}{note}"
    feedback = "" if passed else f"The tests did not pass (reward {reward:g})."
    return Verdict(
        reward, passed, detail=detail + ("" if passed else shown), feedback=feedback, environment=result.environment
    )
