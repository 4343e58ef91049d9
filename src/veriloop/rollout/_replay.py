"""The ``replay`` engine: a policy that plays known action sequences, for checking environments.

A script is a JSONL file, one row per task: ``{"prompt": ..., "turns": ["...", ...]}`` where
``prompt`` is the task's prompt text (its first user message) and ``turns`` are the assistant
replies to give, in order (tool calls such as ``<run_shell>...</run_shell>`` included). A reply
past the last one is empty (the episode ends), and a prompt without a row gets an empty reply.
So an evaluation of a task set with a script of known-good sequences must pass every task, and
one of known-bad or tampering sequences must pass none: the verifiers and environments, not the
model, are under test. Text-level: it reports no tokens or log-probs, so it cannot be trained.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from veriloop.core import UserError, iter_objects
from veriloop.rollout._engine import ENGINES, Prompt
from veriloop.rollout._sampling import Sample, SamplingParams


class ReplayEngine:
    """Replays the turns of a script (see the module's docstring)."""

    name = "replay"
    policy_version = 0

    def __init__(self, script: str | Path):
        self.script = str(script)
        self._turns: dict[str, tuple[str, ...]] = {}
        problems = []
        for number, row, error in iter_objects(script):
            where = f"{script}: line {number}"
            if error is not None:
                problems.append(f"{where}: {error}")
            elif not isinstance(row.get("prompt"), str) or not _all_text(row.get("turns")):
                problems.append(f'{where}: needs "prompt" (text) and "turns" (a list of texts)')
            elif row["prompt"] in self._turns:
                problems.append(f"{where}: a second row for the same prompt")
            else:
                self._turns[row["prompt"]] = tuple(row["turns"])
        if problems:
            raise UserError("; ".join(problems[:5]))

    @property
    def tokenizer(self) -> Any | None:
        return None

    def generate(self, prompts: Sequence[Prompt], params: SamplingParams) -> list[list[Sample]]:
        return [[self._reply(prompt)] * params.n for prompt in prompts]

    async def agenerate(self, prompts: Sequence[Prompt], params: SamplingParams) -> list[list[Sample]]:
        return self.generate(prompts, params)

    def _reply(self, prompt: Prompt) -> Sample:
        messages = [m for m in prompt if isinstance(m, dict)]
        users = [m["content"] for m in messages if m.get("role") == "user"]
        turns = self._turns.get(users[0], ()) if users else ()
        done = sum(m.get("role") == "assistant" for m in messages)
        text = turns[done] if done < len(turns) else ""
        return Sample(text=text, token_ids=(), logprobs=(), finish_reason="stop")

    def update_weights(self, state_dict: dict[str, Any] | None, version: int) -> None:
        raise UserError("the replay engine plays a script: it has no weights to train")

    def close(self) -> None:
        return None


def _all_text(turns: Any) -> bool:
    return isinstance(turns, list) and all(isinstance(t, str) for t in turns)


ENGINES.add("replay", ReplayEngine)
