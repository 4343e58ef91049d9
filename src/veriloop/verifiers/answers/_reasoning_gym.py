"""The ``reasoning_gym`` verifier kind: any reasoning-gym generator, scored by its own scorer.

A task names the generator and the exact draw (``dataset``, ``config``, ``seed``, ``size``,
``index``); the entry is rebuilt in a killable check process and the generator's
``score_answer`` scores the answer under a hard time limit. Nothing is downloaded.

The answer is the content of ``<answer>...</answer>`` when the response has that tag (several
different tagged answers score 0), else the whole response stripped. The reward is the
scorer's own score (some generators give partial credit); ``binary`` turns it into 1 or 0.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from veriloop.core import Task
from veriloop.verifiers._registry import Verdict, VerifierConfig, register_verifier
from veriloop.verifiers.answers._tags import tag_contents
from veriloop.verifiers.answers._check_pool import CheckTimeout, shared_pool

REASONING_GYM_CHECK = "veriloop.verifiers.answers._reasoning_gym_check:score_reasoning_gym_answer"


class ReasoningGymConfig(VerifierConfig):
    dataset: str = Field(min_length=1, description="reasoning-gym generator name, e.g. 'basic_arithmetic'")
    config: dict[str, Any] = Field(default_factory=dict, description="the generator's config fields")
    seed: int = Field(description="seed the task set was drawn with")
    size: int = Field(ge=1, description="size the task set was drawn with")
    index: int = Field(ge=0, description="this task's index in the draw")
    extract: Literal["auto", "answer_tag", "full"] = Field(
        default="auto", description="answer from <answer> tags (auto: when present), or the whole response"
    )
    binary: bool = Field(default=False, description="reward 1 when passed, else 0 (no partial credit)")
    pass_threshold: float = Field(default=1.0, gt=0, le=1, description="score that counts as passed")
    timeout_s: float = Field(default=10.0, gt=0, le=600, description="hard wall-clock limit of one check")
    check_question: bool = Field(
        default=True, description="fail as infra_error when the rebuilt question is not in the prompt"
    )


def _prompt_text(task: Task) -> str:
    return task.prompt if isinstance(task.prompt, str) else "\n".join(m.content for m in task.prompt)


def extract_tagged_answer(response: str, extract: str) -> tuple[str | None, str]:
    """``(answer, problem)``: the answer text, or None and why none could be taken."""
    if extract == "full":
        return response.strip(), ""
    tagged = [t.strip() for t in tag_contents(response)]
    if tagged:
        if len(set(tagged)) > 1:
            shown = ", ".join(repr(t[:60]) for t in list(dict.fromkeys(tagged))[:4])
            return None, f"several different answers in <answer> tags ({shown})"
        return tagged[0], ""
    if extract == "answer_tag":
        return None, "no <answer>...</answer> tag"
    return response.strip(), ""


@register_verifier("reasoning_gym", ReasoningGymConfig)
def check_reasoning_gym(config: ReasoningGymConfig, task: Task, response: str) -> Verdict:
    """The generator's own score for the answer (see the module docstring)."""
    answer, problem = extract_tagged_answer(response, config.extract)
    if answer is None:
        return Verdict(
            0.0,
            False,
            detail=problem,
            feedback=f"Found {problem}; give exactly one final answer inside <answer></answer>.",
        )
    request = {
        "dataset": config.dataset,
        "config": config.config,
        "seed": config.seed,
        "size": config.size,
        "index": config.index,
        "answer": answer,
        "prompt": _prompt_text(task) if config.check_question else None,
    }
    try:
        score = shared_pool(REASONING_GYM_CHECK).call(request, config.timeout_s)["score"]
    except CheckTimeout as exc:
        raise CheckTimeout(f"{config.dataset} scorer: {exc}") from None
    passed = score >= config.pass_threshold
    reward = float(passed) if config.binary else score
    shown = answer if len(answer) <= 80 else answer[:77] + "..."
    if passed:
        return Verdict(reward, True, detail=f"{config.dataset} scorer gave {score:g}", feedback="Correct.")
    return Verdict(
        reward,
        False,
        detail=f"{config.dataset} scorer gave {score:g} for {shown!r}",
        feedback=f"Your answer {shown!r} is not correct" + (" (partly right)." if score > 0 else "."),
    )
