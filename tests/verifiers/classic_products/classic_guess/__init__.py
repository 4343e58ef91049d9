"""A guessing game as a multi-turn environment of verifiers 0.1 (``load_environment`` returning a
``MultiTurnEnv``): the environment hides the row's answer, answers each guess with "higher" or
"lower" until the guess is right or ``max_turns`` guesses were made, and its rubric pays the
right guess, read from the rollout's state, and following the hints, read from its messages."""

import re

import verifiers as vf
from datasets import Dataset


def _guess(message):
    found = re.findall(r"<guess>\s*(-?\d+)\s*</guess>", str(message.get("content") or ""))
    return int(found[-1]) if found else None


class GuessEnv(vf.MultiTurnEnv):
    async def setup_state(self, state, **kwargs):
        state["target"] = int(state["answer"])
        state["solved"] = False
        return state

    async def is_completed(self, messages, state, **kwargs):
        if messages and messages[-1]["role"] == "assistant":
            state["solved"] = _guess(messages[-1]) == state["target"]
        return state["solved"]

    async def env_response(self, messages, state, **kwargs):
        guess = _guess(messages[-1])
        if guess is None:
            text = "Give your guess as <guess>N</guess>."
        else:
            text = "higher" if guess < state["target"] else "lower"
        return [{"role": "user", "content": text}], state


def solved(state, **kwargs):
    return float(state.get("solved", False))


def followed_the_hints(completion, **kwargs):
    """1 when every guess after a hint moved the way the hint said."""
    last, hint = None, None
    for message in completion:
        if message["role"] == "user":
            hint = message["content"]
        elif (guess := _guess(message)) is not None:
            if last is not None and hint in ("higher", "lower") and (guess > last) != (hint == "higher"):
                return 0.0
            last = guess
    return 1.0


def load_environment(max_turns=4, message_type="chat", **kwargs):
    rows = [
        {"question": "Find the hidden number from 0 to 9; answer <guess>N</guess>.", "answer": str(n)} for n in (3, 8)
    ]
    return GuessEnv(
        dataset=Dataset.from_list(rows),
        max_turns=max_turns,
        message_type=message_type,
        rubric=vf.Rubric(funcs=[solved, followed_the_hints], weights=[0.75, 0.25]),
    )
