"""The ``reasoning_gym`` verifier kind: any reasoning-gym generator, scored by its own scorer.

A task names the generator and the exact draw (``dataset``, ``config``, ``seed``, ``size``,
``index``); the entry is rebuilt and the generator's ``score_answer`` scores the answer under a
hard time limit. Nothing is downloaded. Scorers are third-party code and some evaluate the
answer, so checks run in an isolated pool (``_check_pool.CheckPool(isolated=True)``): a
bubblewrap box without network or writable host paths, one fresh forked process per check;
answers to scorers that evaluate them must first pass a guard that reads them as data
(``_reasoning_gym_guards``). The host never evaluates answer text.

The answer is the content of ``<answer>...</answer>`` when the response has that tag (several
different tagged answers score 0), else the whole response stripped. The reward is the
scorer's own score (some generators give partial credit); ``binary`` turns it into 1 or 0.

Credit goes to one committed answer only (``hedges: refuse``, the default): when the answer
holds the gold answer next to other words or numbers (``41 42``, ``it is 42 or 43``), it scores
0 if the gold is short (at most ``SHORT_GOLD_WORDS`` words) or if the scorer gave less than a
pass; so neither a list of candidates nor the gold buried in a sentence collects the partial
credit of lenient scorers (reasoning-gym's default gives ``len(gold) / len(answer)`` to any
answer containing the gold). The committed answer is the tagged one, or without a tag the
whole response: so reasoning followed by an untagged short answer counts as a hedge, and the
importer's instruction asks for the tag. ``hedges: lenient`` keeps the scorer's own score.
"""

from __future__ import annotations

import re
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
    hedges: Literal["refuse", "lenient"] = Field(
        default="refuse",
        description="refuse: credit only for one committed answer (the gold among other words scores 0); "
        "lenient: the scorer's own score",
    )
    raw_scorer: bool = Field(
        default=False,
        description="the generator's scorer alone, without answer guards or the hedge rule "
        "(to audit the scorer itself; the check still runs in its box)",
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


SHORT_GOLD_WORDS = 3
_ALNUM = re.compile(r"\w")


def buried_gold(answer: str, gold: str) -> bool:
    """Whether ``answer`` holds ``gold`` as a whole token (not inside a longer word or number) next to
    other words or numbers."""
    answer, gold = answer.strip(), gold.strip()
    if not gold or answer == gold:
        return False
    # A whole token: not part of a longer word or number (``420``, ``42.5``), a full stop may follow.
    pattern = re.compile(r"(?<!\w)(?<!\d\.)" + re.escape(gold) + r"(?!\w|\.\d)")
    if not pattern.search(answer):
        return False
    return bool(_ALNUM.search(pattern.sub(" ", answer)))


def _hedged(config: ReasoningGymConfig, task: Task, answer: str, score: float) -> bool:
    if config.hedges == "lenient" or config.raw_scorer or task.gold is None:
        return False
    gold = str(task.gold)
    if not buried_gold(answer, gold):
        return False
    return len(gold.split()) <= SHORT_GOLD_WORDS or score < config.pass_threshold


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
        "guard": not config.raw_scorer,
    }
    try:
        result = shared_pool(REASONING_GYM_CHECK, isolated=True).call(request, config.timeout_s)
    except CheckTimeout as exc:
        raise CheckTimeout(f"{config.dataset} scorer: {exc}") from None
    shown = answer if len(answer) <= 80 else answer[:77] + "..."
    if "refused" in result:
        return Verdict(
            0.0,
            False,
            detail=f"{config.dataset}: answer refused before scoring: {result['refused']}",
            feedback=f"Your answer {shown!r} is not a valid answer here: {result['refused']}.",
        )
    score = float(result["score"])
    if _hedged(config, task, answer, score):
        return Verdict(
            0.0,
            False,
            detail=f"{config.dataset}: the gold answer is among other words or numbers in {shown!r} (a hedge)",
            feedback="Give exactly one final answer and nothing else inside <answer></answer>.",
        )
    passed = score >= config.pass_threshold
    reward = float(passed) if config.binary else score
    if passed:
        return Verdict(reward, True, detail=f"{config.dataset} scorer gave {score:g}", feedback="Correct.")
    return Verdict(
        reward,
        False,
        detail=f"{config.dataset} scorer gave {score:g} for {shown!r}",
        feedback=f"Your answer {shown!r} is not correct" + (" (partly right)." if score > 0 else "."),
    )
