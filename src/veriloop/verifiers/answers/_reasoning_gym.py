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

Non-answers earn nothing. An answer that commits to no solution (``_commitment``: empty or a
placeholder, a tautology such as ``x = x``, the question's text or numbers given back) scores 0
before any scorer sees it. And partial credit is kept only from scorers that do not pay for
form: each draw's scorer is probed with such non-answers (in its box, see
``_reasoning_gym_check``), and when any of them earns more than 0 the reward is 1 for a pass and
0 otherwise (``partial_credit: auto``, the default); ``partial_credit: on`` keeps the scorer's
partial credit regardless, and ``hedges: lenient`` keeps it for the gold among other words. A scorer that raises on an answer it cannot read scores that answer 0;
a scorer that cannot run is an infra error.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field

from veriloop.core import Task
from veriloop.verifiers._registry import Verdict, VerifierConfig, register_verifier
from veriloop.verifiers.answers._check_pool import CheckTimeout, shared_pool
from veriloop.verifiers.answers._commitment import commitment_problem
from veriloop.verifiers.answers._tags import tag_contents

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
    partial_credit: Literal["auto", "on"] = Field(
        default="auto",
        description="auto: the scorer's partial credit unless it pays a non-answer (the question given back, "
        "a tautology, an empty answer) on this draw, then 1 for a pass and 0 otherwise; on: always keep it",
    )
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


def _refused(detail: str, feedback: str) -> Verdict:
    return Verdict(0.0, False, detail=detail, feedback=feedback)


def _early_refusal(config: ReasoningGymConfig, task: Task, answer: str) -> Verdict | None:
    """0 for an answer that commits to no solution (see ``_commitment``), before any scorer runs."""
    if config.raw_scorer:
        return None
    problem = commitment_problem(answer, _prompt_text(task), None if task.gold is None else str(task.gold))
    if problem is None:
        return None
    return _refused(
        f"{config.dataset}: answer refused before scoring: it commits to no solution ({problem})",
        "Your answer does not answer the question; give your solution inside <answer></answer>.",
    )


def _scorer_refusal(config: ReasoningGymConfig, result: dict[str, Any], shown: str) -> Verdict | None:
    """0 for an answer the guard refused or the scorer could not read."""
    if "refused" in result:
        return _refused(
            f"{config.dataset}: answer refused before scoring: {result['refused']}",
            f"Your answer {shown!r} is not a valid answer here: {result['refused']}.",
        )
    if "unparsable" in result:
        return _refused(
            f"{config.dataset}: the scorer could not read the answer ({result['unparsable']})",
            f"Your answer {shown!r} is not in the form the question asks for.",
        )
    return None


def _keeps_partial_credit(config: ReasoningGymConfig, task: Task, answer: str) -> bool:
    """Partial credit asked for: always (``partial_credit: on``), or for the gold among other words
    (``hedges: lenient``)."""
    if config.partial_credit == "on":
        return True
    return config.hedges == "lenient" and task.gold is not None and buried_gold(answer, str(task.gold))


def _reward(config: ReasoningGymConfig, task: Task, answer: str, result: dict[str, Any]) -> tuple[float, str]:
    """The reward for the scorer's score, and why partial credit was dropped (empty when it was not)."""
    score = float(result["score"])
    passed = score >= config.pass_threshold
    if config.binary or config.raw_scorer or passed:
        return (float(passed) if config.binary else score), ""
    leak = result.get("non_answer_credit")
    if not leak or score <= 0 or _keeps_partial_credit(config, task, answer):
        return score, ""
    return 0.0, f"; partial credit is off for this draw: its scorer pays non-answers ({leak})"


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
    early = _early_refusal(config, task, answer)
    if early is not None:
        return early
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
    refusal = _scorer_refusal(config, result, shown)
    if refusal is not None:
        return refusal
    score = float(result["score"])
    if _hedged(config, task, answer, score):
        return _refused(
            f"{config.dataset}: the gold answer is among other words or numbers in {shown!r} (a hedge)",
            "Give exactly one final answer and nothing else inside <answer></answer>.",
        )
    passed = score >= config.pass_threshold
    reward, dropped = _reward(config, task, answer, result)
    if passed:
        return Verdict(reward, True, detail=f"{config.dataset} scorer gave {score:g}", feedback="Correct.")
    return Verdict(
        reward,
        False,
        detail=f"{config.dataset} scorer gave {score:g} for {shown!r}{dropped}",
        feedback=f"Your answer {shown!r} is not correct" + (" (partly right)." if reward > 0 else "."),
    )
