"""One episode: the policy acts, tools execute, the verifier observes, until done or out of budget.

For token-level engines the chat template is applied once, to the prompt; afterwards the
sequence grows only by what the model generated (loss mask 1) and by observation tokens
(loss mask 0) rendered with the same template, so the training sequence is exactly what the
model saw and produced. A context budget may cut observations or rewrite the context; the
trajectory is then trained as the contexts the model actually saw (``_context``).

Engines that keep sessions (``hf``) continue each turn from the keys and values of the
previous ones; the episode names its session and ends it when it returns.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from veriloop.core import (
    Message,
    Registry,
    Response,
    Score,
    Snapshot,
    Task,
    Trajectory,
    Turn,
    inline_form,
    judgeable_response,
    snapshot_archive,
)
from veriloop.rollout._actions import Action, parse_action, tool_instructions
from veriloop.rollout._context import (
    DROPPED_OBSERVATION,
    ContextPolicy,
    TokenContext,
    fit_by_truncation,
)
from veriloop.rollout._engine import Engine
from veriloop.rollout._sampling import Sample, SamplingParams
from veriloop.rollout._stopping import FailureTracker, StopConfig, StopPredicate


def check_domain_budgets(budgets: Any) -> dict[str, int]:
    """``budgets`` as a mapping of task domain to new tokens per model turn, each a whole number
    >= 1; a ValueError naming the first bad entry and the form expected otherwise."""
    if not isinstance(budgets, Mapping):
        raise ValueError(f"expected a mapping of domain to tokens per turn, e.g. {{cad: 400}}; got {budgets!r}")
    for domain, tokens in budgets.items():
        if not isinstance(domain, str) or not domain:
            raise ValueError(f"domain {domain!r}: a domain is a non-empty name, e.g. {{cad: 400}}")
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
            raise ValueError(
                f"domain {domain!r}: {tokens!r} is not a token budget; give a whole number >= 1, e.g. {{{domain}: 400}}"
            )
    return dict(budgets)


def check_turn_fits(context_budget: int | None, largest_turn: int, turn_field: str) -> None:
    """A ValueError unless ``context_budget`` (None: unbounded) exceeds ``largest_turn``, the most
    new tokens any task's turn may have (``turn_field`` or a ``max_tokens_by_domain`` value)."""
    if context_budget is not None and context_budget <= largest_turn:
        raise ValueError(
            f"context_budget ({context_budget}) must exceed {turn_field} and every max_tokens_by_domain "
            f"value (largest: {largest_turn}): a turn's new tokens count against it"
        )


class EpisodeConfig(BaseModel):
    """How an episode runs: sampling, tools, budgets."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    temperature: float = Field(default=1.0, ge=0, description="sampling temperature")
    top_p: float = Field(default=1.0, gt=0, le=1, description="nucleus sampling mass")
    top_k: int = Field(default=0, ge=0, description="sample among the k likeliest tokens only (0: all)")
    max_tokens_per_turn: int = Field(
        default=256, ge=1, description="new tokens per model turn (tasks of a domain max_tokens_by_domain leaves out)"
    )
    max_tokens_by_domain: dict[str, int] = Field(
        default_factory=dict,
        description="new tokens per model turn for the tasks of these domains, e.g. {cad: 400}",
    )
    tools: tuple[str, ...] = Field(default=(), description="enabled tools: python, shell, submit")
    tool_instructions: bool = Field(
        default=True, description="with tools, open the prompt with a system message describing them"
    )
    feedback_on_fail: bool = Field(
        default=False, description="after a failing answer, show the verifier's feedback and go on"
    )
    max_observation_chars: int = Field(default=2000, ge=64, description="tool output shown to the model")
    context_budget: int | None = Field(
        default=None,
        ge=16,
        description="most tokens in the model's context during a turn (shown + new); None: unbounded. "
        "Token-level engines only",
    )
    context_policy: ContextPolicy = Field(
        default="stop",
        description="when the next observation would break the budget: truncate (cut it in the middle), "
        "drop_oldest (replace older observations by a marker, the prompt pinned) or stop",
    )
    reuse_kv: bool = Field(
        default=True,
        description="continue each turn from the keys and values of the previous ones (engines that keep "
        "sessions); off: every turn prefills the whole context again",
    )
    stop: StopConfig = Field(default_factory=StopConfig)

    @field_validator("max_tokens_by_domain", mode="before")
    @classmethod
    def _whole_budgets(cls, budgets: Any) -> dict[str, int]:
        return check_domain_budgets(budgets)

    @model_validator(mode="after")
    def _budget_leaves_a_turn(self) -> EpisodeConfig:
        check_turn_fits(self.context_budget, self.largest_turn, "max_tokens_per_turn")
        return self

    def max_tokens_for(self, domain: str) -> int:
        """New tokens per model turn for a task of ``domain``."""
        return self.max_tokens_by_domain.get(domain, self.max_tokens_per_turn)

    @property
    def largest_turn(self) -> int:
        """The most new tokens any task's turn may have (what sizes buffers shared by every domain)."""
        return max([self.max_tokens_per_turn, *self.max_tokens_by_domain.values()])


@dataclass(frozen=True)
class Observation:
    text: str
    failed: bool
    seconds: float
    workspace: Any = None  # what the next tool call starts from (a sandbox snapshot)
    environment: str | None = None  # hash of the environment the tool ran on


class ToolExecutor(Protocol):
    async def execute(self, action: Action, workspace: Any, environment: str | None = None) -> Observation: ...


Verify = Callable[[Task, Response], Awaitable[Score]]

EPISODE_DRIVERS: Registry[Callable[..., Awaitable[Trajectory]]] = Registry("episode driver")
"""verifier kind -> ``driver(task, engine, config, *, seed, group_id, sample_index)``: the episodes
of tasks whose environment answers each turn and gives the reward itself (``openenv``, and
multi-turn ``verifiers_taskset`` tasks). A driver with an ``applies(task) -> bool`` attribute
drives only the tasks it applies to; the kind's other tasks run as ordinary episodes."""


def _driver_for(task: Task) -> Callable[..., Awaitable[Trajectory]] | None:
    if task.verifier_kind not in EPISODE_DRIVERS:
        return None
    driver = EPISODE_DRIVERS.get(task.verifier_kind)
    applies = getattr(driver, "applies", None)
    return driver if applies is None or applies(task) else None


@dataclass
class _State:
    prompt_messages: list[dict[str, str]]
    messages: list[dict[str, str]]
    context: TokenContext
    turns: list[Turn] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=lambda: {"generate_s": 0.0, "tools_s": 0.0, "verify_s": 0.0})
    workspace: Any = None
    environment: str | None = None
    session: str | None = None  # the engine session that keeps this episode's keys and values
    context_tokens: list[int] = field(default_factory=list)  # context length at the start of each turn
    truncations: int = 0
    drops: int = 0


def observation_ids(tokenizer: Any, messages: list[dict[str, str]], observations: list[dict[str, str]]) -> list[int]:
    """Tokens between the end of the model's turn (its end-of-turn token) and its next turn.

    ``messages`` ends with the model's turn; ``observations`` are the messages that follow it.
    Rendered by the chat template as the difference between the conversation with and
    without the observations, so any template that extends a conversation by appending works.
    """
    before = tokenizer.apply_chat_template(messages, tokenize=False)
    after = tokenizer.apply_chat_template(messages + observations, tokenize=False, add_generation_prompt=True)
    if not after.startswith(before):
        raise ValueError("the chat template does not extend the conversation by appending")
    eos_text = tokenizer.eos_token or ""
    end = before.rfind(eos_text) + len(eos_text) if eos_text and eos_text in before else len(before)
    return list(tokenizer.encode(before[end:] + after[len(before) :], add_special_tokens=False))


def _start(task: Task, engine: Engine, config: EpisodeConfig) -> _State:
    messages = task.messages()
    if config.tools and config.tool_instructions:
        messages = [{"role": "system", "content": tool_instructions(config.tools)}, *messages]
    prompt_ids: list[int] = []
    if engine.tokenizer is not None:
        prompt_ids = engine.encode_prompt(messages)  # type: ignore[attr-defined]
    workspace = Snapshot(archive=snapshot_archive(task.workspace_files())) if task.workspace is not None else None
    session = uuid.uuid4().hex if config.reuse_kv and getattr(engine, "keeps_sessions", False) else None
    return _State(
        prompt_messages=list(messages),
        messages=list(messages),
        context=TokenContext(prompt_ids),
        workspace=workspace,
        session=session,
    )


def prompt_tokens(task: Task, engine: Engine, config: EpisodeConfig) -> int | None:
    """Tokens of the episode's first prompt (chat template and tool instructions included);
    None for text-level engines, which have no tokenizer to count with."""
    return len(_start(task, engine, config).context.prompt_ids) if engine.tokenizer is not None else None


async def _model_turn(
    engine: Engine, state: _State, config: EpisodeConfig, budget: int, seed: int | None
) -> tuple[Sample, str]:
    """Sample one model turn of at most ``budget`` tokens and add it to the episode (its context,
    messages and turns); the sample and the turn's text."""
    if engine.tokenizer is not None:
        state.context_tokens.append(len(state.context))
    params = SamplingParams(
        temperature=config.temperature,
        top_p=config.top_p,
        top_k=config.top_k,
        max_tokens=budget,
        seed=seed,
        repetition_stop=config.stop.repetition_repeats,
    )
    sample = await _generate(engine, state, params)
    text = _assistant_text(engine, sample)
    versions = sample.versions or (engine.policy_version,) * len(sample.token_ids)  # untagged: one version
    state.context.add_generated(sample.token_ids, sample.logprobs, versions)
    state.messages.append({"role": "assistant", "content": text})
    logprobs = sample.logprobs if len(sample.logprobs) == len(sample.token_ids) else ()
    state.turns.append(
        Turn(
            role="assistant",
            text=text,
            token_ids=sample.token_ids,
            logprobs=logprobs,
            generated_tokens=sample.num_tokens,
        )
    )
    return sample, text


async def _generate(engine: Engine, state: _State, params: SamplingParams) -> Sample:
    prompt: Any = state.context.ids if engine.tokenizer is not None else state.messages
    started = time.perf_counter()
    if state.session is not None:
        [[sample]] = await engine.agenerate([prompt], params, sessions=[state.session])  # type: ignore[call-arg]
    else:
        [[sample]] = await engine.agenerate([prompt], params)
    state.timings["generate_s"] += time.perf_counter() - started
    return sample


def _assistant_text(engine: Engine, sample: Sample) -> str:
    """The turn's text without the end-of-turn token the template adds back."""
    eos = getattr(engine.tokenizer, "eos_token", None)
    return sample.text.removesuffix(eos) if eos and sample.finish_reason == "eos" else sample.text


def _add_observation(engine: Engine, state: _State, text: str, ids: list[int] | None = None) -> None:
    """Show observation ``text`` (``ids``: its rendering, when already made)."""
    message = {"role": "tool", "content": text}
    if engine.tokenizer is not None:
        ids = ids if ids is not None else observation_ids(engine.tokenizer, state.messages, [message])
        state.context.add_observation(ids, len(state.messages))
    else:
        ids = []
    state.messages.append(message)
    state.turns.append(Turn(role="observation", text=text, token_ids=tuple(ids)))


def _show_observation(task: Task, engine: Engine, state: _State, config: EpisodeConfig, text: str) -> bool:
    """Add ``text`` (cut to ``max_observation_chars``) to the episode as the next observation,
    fitted to the context budget with room for the next turn; False when it cannot fit (the
    episode stops: ``context_budget``)."""
    shown = text[: config.max_observation_chars]
    fitted = _fit_observation(engine, state, config, shown, config.max_tokens_for(task.domain))
    if fitted is None:
        return False
    _add_observation(engine, state, *fitted)
    return True


def _fit_observation(
    engine: Engine, state: _State, config: EpisodeConfig, text: str, turn_tokens: int
) -> tuple[str, list[int] | None] | None:
    """The observation as shown within the context budget, leaving ``turn_tokens`` for the next
    turn, with its ids; None: stop the episode.

    Applies ``config.context_policy`` (see ``_context``) when it does not fit as it is.
    """
    tokenizer = engine.tokenizer
    if config.context_budget is None or tokenizer is None:
        return text, None
    context = state.context

    def render(shown: str) -> list[int]:
        return observation_ids(tokenizer, state.messages, [{"role": "tool", "content": shown}])

    def room() -> int:
        return cast(int, config.context_budget) - turn_tokens - len(context)

    ids = render(text)
    if len(ids) <= room():
        return text, ids
    if config.context_policy == "truncate":
        fitted = fit_by_truncation(tokenizer, text, render, room())
        state.truncations += fitted is not None
        return fitted
    if config.context_policy == "drop_oldest":
        marker = {"role": "tool", "content": DROPPED_OBSERVATION}
        while len(ids) > room():
            marker_ids = observation_ids(tokenizer, state.messages, [marker])
            oldest = context.droppable(len(marker_ids))
            if oldest is None:
                return None
            context.replace(oldest, observation_ids(tokenizer, state.messages[: oldest.message], [marker]))
            state.messages[oldest.message] = marker
            state.drops += 1
        return text, ids
    return None


async def run_episode(
    task: Task,
    engine: Engine,
    config: EpisodeConfig,
    verify: Verify,
    tools: ToolExecutor | None = None,
    *,
    seed: int | None = None,
    group_id: str | None = None,
    sample_index: int = 0,
    predicate: StopPredicate | None = None,
) -> Trajectory:
    """Run one episode of ``task`` and return its trajectory (never raises for model behaviour).

    Tasks of a kind in ``EPISODE_DRIVERS`` run through that driver instead (no tools, no verify)."""
    if (driver := _driver_for(task)) is not None:
        return await driver(task, engine, config, seed=seed, group_id=group_id, sample_index=sample_index)
    state = _start(task, engine, config)
    try:
        return await _run_turns(task, engine, config, verify, tools, state, seed, group_id, sample_index, predicate)
    finally:
        if state.session is not None:
            engine.end_session(state.session)  # type: ignore[attr-defined]


def _turn_budget(task: Task, engine: Engine, state: _State, config: EpisodeConfig) -> tuple[int, str]:
    """New tokens the next turn may generate (the task's domain's turn budget at most), and the
    stop reason when that is none."""
    budget = min(config.max_tokens_for(task.domain), config.stop.max_total_tokens - state.context.tokens)
    if budget > 0 and config.context_budget is not None and engine.tokenizer is not None:
        room = config.context_budget - len(state.context)
        if room < budget:
            return room, "context_budget"
    return budget, "max_tokens"


async def _run_turns(
    task: Task,
    engine: Engine,
    config: EpisodeConfig,
    verify: Verify,
    tools: ToolExecutor | None,
    state: _State,
    seed: int | None,
    group_id: str | None,
    sample_index: int,
    predicate: StopPredicate | None,
) -> Trajectory:
    failures = FailureTracker(config.stop.max_repeated_failures)
    stop_reason, final_text, score = "max_turns", "", None
    for turn_index in range(config.stop.max_turns):
        budget, short_reason = _turn_budget(task, engine, state, config)
        if budget <= 0:
            stop_reason = short_reason
            break
        sample, text = await _model_turn(
            engine, state, config, budget, None if seed is None else seed + 1000 * turn_index
        )
        action = parse_action(text, config.tools) if config.tools else None
        if action is not None:
            state.turns[-1] = state.turns[-1].model_copy(update={"tool": action.tool})
        final_text = action.argument if action and action.tool == "submit" else text
        if sample.finish_reason == "error":  # the engine broke, not the model: an infra error, never a 0
            stop_reason, score = "error", _generation_failed(task, sample)
            break
        if sample.finish_reason in ("repetition", "length"):
            stop_reason = {"repetition": "repetition", "length": "max_tokens"}[sample.finish_reason]
            break
        if action is None or action.tool == "submit":
            score, seconds = await _timed(_verify_final(verify, task, state, final_text))
            state.timings["verify_s"] += seconds
            if score.passed or not config.feedback_on_fail or score.status != "scored":
                stop_reason = "done"
                break
            observation = Observation(text=score.feedback or "That answer is not correct.", failed=True, seconds=0.0)
            score = None
        elif tools is None:
            observation = Observation(text="Tools are not available.", failed=True, seconds=0.0)
        else:
            observation = await tools.execute(action, state.workspace, task.environment)
            state.timings["tools_s"] += observation.seconds
            state.workspace = observation.workspace
            state.environment = observation.environment or state.environment
        if turn_index == config.stop.max_turns - 1:
            break
        if failures.record(action.argument if action else final_text, observation.failed):
            stop_reason = "repeated_action"
            break
        if predicate is not None and predicate(_predicate_view(state, action, observation)):
            stop_reason = "predicate"
            break
        if not _show_observation(task, engine, state, config, observation.text):
            stop_reason = "context_budget"
            break
        if state.context.tokens >= config.stop.max_total_tokens:
            stop_reason = "max_tokens"
            break
    if score is None:
        score, seconds = await _timed(_verify_final(verify, task, state, final_text))
        state.timings["verify_s"] += seconds
    return _trajectory(task, engine, state, score, final_text, stop_reason, group_id, sample_index)


async def _verify_final(verify: Verify, task: Task, state: _State, text: str) -> Score:
    """The verifier's score of the answer ``text`` and, when the episode has a workspace, of the
    workspace its last tool call left (a final workspace over the bounds of a response's scores 0).
    The response carries the text of every model turn, for verifiers that judge each turn."""
    turns = tuple(turn.text for turn in state.turns if turn.role == "assistant")
    if state.workspace is None:
        return await verify(task, Response(id=task.id, task_id=task.id, response=text, turns=turns))
    final = inline_form(state.workspace.files())
    row = {"id": task.id, "task_id": task.id, "response": text, "workspace": final, "turns": turns}
    judged = judgeable_response(row)
    return judged if isinstance(judged, Score) else await verify(task, judged)


def _generation_failed(task: Task, sample: Sample) -> Score:
    """The score of an episode whose generation failed, keeping the engine's reason."""
    cause = sample.error or "the engine returned an error"
    return Score(
        id=task.id,
        task_id=task.id,
        reward=None,
        passed=False,
        status="infra_error",
        detail=f"generation failed: {cause}",
    )


def _predicate_view(state: _State, action: Action | None, observation: Observation) -> dict[str, Any]:
    return {
        "turns": list(state.turns),
        "tokens": state.context.tokens,
        "last_action": action,
        "last_failed": observation.failed,
        "last_observation": observation.text,
    }


async def _timed(awaitable: Awaitable[Score]) -> tuple[Score, float]:
    started = time.perf_counter()
    result = await awaitable
    return result, time.perf_counter() - started


def _trajectory(
    task: Task,
    engine: Engine,
    state: _State,
    score: Score,
    final_text: str,
    stop_reason: str,
    group_id: str | None,
    sample_index: int,
) -> Trajectory:
    trajectory_id = uuid.uuid4().hex[:16]
    return Trajectory(
        id=trajectory_id,
        task_id=task.id,
        domain=task.domain,
        group_id=group_id or task.id,
        sample_index=sample_index,
        prompt=tuple(Message(**m) for m in state.prompt_messages),
        prompt_ids=tuple(state.context.prompt_ids),
        completion_ids=tuple(state.context.completion_ids),
        logprobs=tuple(state.context.logprobs),
        loss_mask=tuple(state.context.mask),
        token_versions=tuple(state.context.versions),
        segments=tuple(state.context.segments),
        context_tokens=tuple(state.context_tokens),
        truncations=state.truncations,
        drops=state.drops,
        turns=tuple(state.turns),
        response=final_text,
        reward=score.reward,
        score=score.model_copy(update={"id": trajectory_id}),
        stop_reason=stop_reason,  # type: ignore[arg-type]
        policy_version=_oldest_version(state.context, engine.policy_version),
        environment=score.environment or state.environment,
        final_workspace=state.workspace,
        timings={k: round(v, 6) for k, v in state.timings.items()},
    )


_VERIFY_THREADS: ThreadPoolExecutor | None = None
_verify_thread_count = 0  # the size _VERIFY_THREADS was made with


async def verify_in_thread(task: Task, response: Response) -> Score:
    """The default verifier hook: ``veriloop.verifiers.verify`` off the event loop.

    Runs on a long-lived pool shared by every rollout, not on a pool made per event loop. The
    pool has at least as many threads as the code sandbox has workers (``set_code_workers``),
    so code verifications are limited by the sandbox, not by threads waiting on it.
    """
    global _VERIFY_THREADS, _verify_thread_count
    from veriloop.verifiers import code_workers, verify

    threads = max(8, code_workers())
    if _verify_thread_count < threads:
        if _VERIFY_THREADS is not None:
            _VERIFY_THREADS.shutdown(wait=False)  # its running verifications finish; new ones go to the larger pool
        _VERIFY_THREADS = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="verify")
        _verify_thread_count = threads
    return await asyncio.get_running_loop().run_in_executor(_VERIFY_THREADS, verify, task, response)


def _oldest_version(context: TokenContext, current: int) -> int:
    """The oldest weights version that sampled a token of the episode, in any of its contexts
    (``current`` when it generated nothing)."""
    tagged = [
        version
        for versions, mask in [(s.token_versions, s.loss_mask) for s in context.segments]
        + [(context.versions, context.mask)]
        for version, trained in zip(versions, mask)
        if trained
    ]
    return min(tagged, default=current)
