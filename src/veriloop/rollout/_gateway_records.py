"""What the gateway records of an episode, and the training trajectory made from it.

A ``GatewayEpisode`` is every call the episode's requests made, in the order their answers
were sent; a request with ``n`` choices is ``n`` calls sharing its ``request`` number. A call
holds the exact tokens: the prompt ids the model saw and the ids it sampled, with their
log-probs. ``extends`` names the earlier call whose prompt and sampled ids this call's
prompt starts with (the conversation went on); ``split`` says why a call of an episode that
already had calls did not continue any of them.

``episode_trajectory`` turns an episode into a ``Trajectory``: one training row per context.
A context is a chain of calls each continuing the one before: its prompt is the first
call's prompt, its completion each call's sampled ids (loss mask 1, their log-probs)
interleaved with the tokens the gateway inserted between calls (tool results, template
text; mask 0, log-prob 0.0). A call that continues no call, or an earlier one than the
last, starts a new context (a ``Trajectory.segments`` entry), so no token is trained that
was not sampled in the context it is trained in.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from veriloop.core import Message, Record, Segment, Trajectory, Turn
from veriloop.rollout._gateway_chat import message_text

SplitReason = Literal["history_changed", "template"]
"""``history_changed``: the messages continue no recorded reply (an earlier turn was edited,
dropped or summarised, or the tools changed); ``template``: they do, but the chat template
does not extend the conversation by appending, so the recorded ids cannot be kept."""


class GatewayCall(Record):
    """One sampled choice of one request, exactly as the model saw and wrote it."""

    index: int = Field(ge=0, description="position in the episode's calls")
    request: int = Field(ge=0, description="the request's number in the episode (its choices share it)")
    choice: int = Field(default=0, ge=0, description="the choice's index in its request")
    endpoint: Literal["chat.completions", "completions"] = "chat.completions"
    model: str = Field(default="", description="the model name the request gave")
    messages: tuple[dict[str, Any], ...] = Field(default=(), description="the request's chat messages")
    tools: tuple[dict[str, Any], ...] = Field(default=(), description="the request's tools")
    prompt: str | None = Field(default=None, description="a completions request's text prompt")
    prompt_token_ids: tuple[int, ...] = ()
    sampled_token_ids: tuple[int, ...] = ()
    logprobs: tuple[float, ...] = Field(default=(), description="the sampler's log-prob of each sampled token")
    text: str = Field(default="", description="the text returned (a chat reply's content)")
    message: dict[str, Any] | None = Field(default=None, description="the assistant message returned (chat)")
    finish_reason: str = Field(default="stop", description="as returned: stop, length or tool_calls")
    policy_version: int = Field(default=0, ge=0, description="weights version when the request was sampled")
    extends: int | None = Field(
        default=None, description="the call whose prompt and sampled ids this prompt starts with"
    )
    split: SplitReason | None = Field(default=None, description="why this call continued none of the earlier ones")


class GatewayEpisode(Record):
    """Every call of one episode (see the module docstring)."""

    id: str
    calls: tuple[GatewayCall, ...] = ()


def episode_trajectory(
    episode: GatewayEpisode,
    *,
    task_id: str | None = None,
    domain: str = "agent",
    group_id: str | None = None,
    sample_index: int = 0,
    reward: float | None = None,
    tokenizer: Any | None = None,
) -> Trajectory:
    """The episode as one training trajectory (see the module docstring).

    Of a request with several choices, the trajectory follows the choice a later call
    continued (the first when none did); the others are counted, not trained. The
    trajectory's ``policy_version`` is the oldest of its calls'; ``metadata["gateway"]``
    holds the episode id, the versions of every call followed, the split count and reasons,
    and the choices left out. ``tokenizer``, when given, decodes the inserted tokens into the
    observation turns' text. Raises ValueError for an episode without calls.
    """
    calls = followed_calls(episode)
    if not calls:
        raise ValueError(f"episode {episode.id!r} has no calls")
    chains: list[list[GatewayCall]] = []
    reasons: list[str] = []
    for call in calls:
        if chains and call.extends == chains[-1][-1].index:
            chains[-1].append(call)
            continue
        if chains:
            reasons.append(call.split or "branch")
        chains.append([call])
    contexts = [_context(chain) for chain in chains]
    last = contexts[-1]
    task = task_id or episode.id
    return Trajectory(
        id=episode.id,
        task_id=task,
        domain=domain,
        group_id=group_id or task,
        sample_index=sample_index,
        prompt=_prompt_messages(calls[0]),
        prompt_ids=last.prompt_ids,
        completion_ids=last.completion_ids,
        logprobs=last.logprobs,
        loss_mask=last.loss_mask,
        token_versions=last.token_versions,
        segments=tuple(contexts[:-1]),
        turns=tuple(turn for chain in chains for turn in _turns(chain, tokenizer)),
        response=calls[-1].text,
        reward=reward,
        policy_version=min(call.policy_version for call in calls),
        context_tokens=tuple(len(call.prompt_token_ids) for call in calls),
        metadata={
            "gateway": {
                "episode_id": episode.id,
                "calls": len(calls),
                "policy_versions": [call.policy_version for call in calls],
                "splits": len(reasons),
                "split_reasons": reasons,
                "choices_left_out": len(episode.calls) - len(calls),
            }
        },
    )


def followed_calls(episode: GatewayEpisode) -> list[GatewayCall]:
    """One call per request, in order: the choice a later call continued, else the first."""
    continued = {call.extends for call in episode.calls if call.extends is not None}
    by_request: dict[int, list[GatewayCall]] = {}
    for call in episode.calls:
        by_request.setdefault(call.request, []).append(call)
    followed = [
        next((c for c in choices if c.index in continued), min(choices, key=lambda c: c.choice))
        for choices in by_request.values()
    ]
    return sorted(followed, key=lambda call: call.index)


def _context(chain: list[GatewayCall]) -> Segment:
    """One context as a training row: the first prompt, then sampled (mask 1) and inserted (mask 0) tokens."""
    completion: list[int] = []
    logprobs: list[float] = []
    mask: list[int] = []
    versions: list[int] = []
    for previous, call in zip([None, *chain[:-1]], chain):
        inserted = _inserted(previous, call) if previous is not None else ()
        completion += [*inserted, *call.sampled_token_ids]
        logprobs += [0.0] * len(inserted) + list(call.logprobs or [0.0] * len(call.sampled_token_ids))
        mask += [0] * len(inserted) + [1] * len(call.sampled_token_ids)
        versions += [0] * len(inserted) + [call.policy_version] * len(call.sampled_token_ids)
    return Segment(
        prompt_ids=chain[0].prompt_token_ids,
        completion_ids=tuple(completion),
        logprobs=tuple(logprobs),
        loss_mask=tuple(mask),
        token_versions=tuple(versions),
    )


def _inserted(previous: GatewayCall, call: GatewayCall) -> tuple[int, ...]:
    """The tokens between ``previous``'s sample and ``call``'s reply, which ``call`` extends."""
    return call.prompt_token_ids[len(previous.prompt_token_ids) + len(previous.sampled_token_ids) :]


def _turns(chain: list[GatewayCall], tokenizer: Any | None) -> list[Turn]:
    turns: list[Turn] = []
    for previous, call in zip([None, *chain[:-1]], chain):
        if previous is not None:
            inserted = _inserted(previous, call)
            text = tokenizer.decode(list(inserted), skip_special_tokens=False) if tokenizer is not None else ""
            turns.append(Turn(role="observation", text=text, token_ids=inserted))
        calls = (call.message or {}).get("tool_calls") or ()
        tool = calls[0]["function"]["name"] if calls else None
        turns.append(
            Turn(role="assistant", text=call.text, token_ids=call.sampled_token_ids, logprobs=call.logprobs, tool=tool)
        )
    return turns


def _prompt_messages(call: GatewayCall) -> tuple[Message, ...]:
    """The first call's messages as records (text content; tool calls are in the episode record)."""
    shown = []
    for message in call.messages:
        role = "system" if message.get("role") == "developer" else message.get("role")
        if role in ("system", "user", "assistant", "tool"):
            shown.append(Message(role=role, content=message_text(message.get("content"))))
    if not shown and call.prompt is not None:
        shown.append(Message(role="user", content=call.prompt))
    return tuple(shown)
