"""The frozen records that cross every boundary: tasks, responses, scores, runs, trajectories.

All records are immutable pydantic models with a JSON schema; they are what gets logged,
stored and sent between processes. Unknown fields are rejected so that a typo in a task file
is an error, not a silently ignored field.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from veriloop.core._workspace import inline_files, workspace_files, workspace_problem

ENVIRONMENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")


class Record(BaseModel):
    """Base of every record: frozen, strict about unknown fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Message(Record):
    """One chat message."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str


class Task(Record):
    """One verifiable task (see docs/architecture.md, "The task record").

    ``verifier`` holds ``kind`` plus the fields of that kind; the kind's own schema is checked
    by ``veriloop.tasks.validate_task`` against the verifier registry. ``gold`` is never shown
    to a model.
    """

    id: str = Field(min_length=1, description="unique within the task set")
    domain: str = Field(min_length=1, description="drives scheduling and per-domain reports")
    prompt: str | tuple[Message, ...] = Field(description="plain text or chat messages")
    verifier: dict[str, Any] = Field(description="{'kind': ..., ...fields of that kind}")
    gold: Any = Field(default=None, description="reference answer or solution")
    difficulty: float | None = Field(default=None, description="optional difficulty estimate")
    metadata: dict[str, Any] = Field(default_factory=dict)
    environment: str | None = Field(
        default=None, description="the sandbox environment its code runs on (built by `veriloop env build`)"
    )
    workspace: dict[str, Any] | str | None = Field(
        default=None,
        description="files its episodes start from: {path: text}, a directory or a tar archive (relative to the task file)",
    )

    @field_validator("environment")
    @classmethod
    def _environment_name(cls, name: str | None) -> str | None:
        if name is not None and not ENVIRONMENT_NAME.match(name):
            raise ValueError(
                "an environment name is 1-64 letters, digits, '.', '_' or '-', starting with one of the first two"
            )
        return name

    @field_validator("workspace")
    @classmethod
    def _workspace_valid(cls, workspace: dict[str, Any] | str | None) -> dict[str, Any] | str | None:
        if isinstance(workspace, dict):
            inline_files(workspace)
        elif isinstance(workspace, str) and not workspace:
            raise ValueError("a workspace path is empty")
        return workspace

    def workspace_files(self) -> dict[str, bytes]:
        """The files the task's episodes start from (empty without a workspace)."""
        return workspace_files(self.workspace)

    @field_validator("prompt")
    @classmethod
    def _prompt_not_empty(cls, prompt: str | tuple[Message, ...]) -> str | tuple[Message, ...]:
        if isinstance(prompt, tuple) and not prompt:
            raise ValueError("a chat prompt needs at least one message")
        return prompt

    @field_validator("verifier")
    @classmethod
    def _verifier_has_kind(cls, verifier: dict[str, Any]) -> dict[str, Any]:
        kind = verifier.get("kind")
        if not isinstance(kind, str) or not kind:
            raise ValueError("needs a 'kind' string naming a verifier kind")
        return verifier

    @field_validator("difficulty")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        if value is not None and not math.isfinite(value):
            raise ValueError("must be a finite number")
        return value

    @property
    def verifier_kind(self) -> str:
        return self.verifier["kind"]

    def messages(self) -> list[dict[str, str]]:
        """The prompt as a chat message list (a plain prompt becomes one user message)."""
        if isinstance(self.prompt, str):
            return [{"role": "user", "content": self.prompt}]
        return [m.model_dump() for m in self.prompt]


class Response(Record):
    """One raw model answer to one task."""

    id: str = Field(min_length=1)
    task_id: str = Field(min_length=1)
    response: str
    workspace: dict[str, Any] | None = Field(
        default=None, description="the final workspace ({path: text}) of an episode, for verifiers that judge it"
    )
    turns: tuple[str, ...] = Field(
        default=(),
        description="the text of every model turn of an episode, in order (tool calls included), "
        "for verifiers that judge each turn; empty for a single answer",
    )

    @field_validator("workspace")
    @classmethod
    def _workspace_valid(cls, workspace: dict[str, Any] | None) -> dict[str, Any] | None:
        if workspace is not None:
            inline_files(workspace)
        return workspace


class Score(Record):
    """A verifier's verdict on one response.

    An infrastructure failure (the grader broke) is ``status='infra_error'`` with
    ``reward=None``: it is never a reward of 0.
    """

    id: str
    task_id: str
    reward: float | None
    passed: bool = False
    status: Literal["scored", "infra_error"] = "scored"
    detail: str = Field(default="", description="what the verifier found, for people")
    feedback: str = Field(default="", description="text a model can use on its next turn")
    environment: str | None = Field(default=None, description="hash of the environment the verdict was reached in")
    images: dict[str, str] = Field(
        default_factory=dict,
        description="pictures for people, name -> base64 PNG (cad_geometry's render); never rewarded",
    )

    @model_validator(mode="after")
    def _reward_matches_status(self) -> Score:
        if self.status == "infra_error" and self.reward is not None:
            raise ValueError("an infra_error score has reward None")
        if self.status == "scored" and (self.reward is None or not math.isfinite(self.reward)):
            raise ValueError("a scored score needs a finite reward")
        return self


def judgeable_response(row: Mapping[str, Any]) -> Response | Score:
    """``row`` as a Response; or, when its final workspace cannot be judged (over the bounds of
    ``MAX_FILES`` and ``MAX_BYTES``, a bad path or content), the Score such a response gets: reward
    0, scored (the workspace is the policy's doing, not the grader's), saying why. Any other bad
    field raises ValidationError. Episodes and ``veriloop verify`` both read responses through
    here, so a workspace over bounds scores the same in both."""
    problem = workspace_problem(row.get("workspace"))
    if problem is None:
        return Response.model_validate(dict(row))
    response = Response.model_validate({**row, "workspace": None})
    return Score(
        id=response.id,
        task_id=response.task_id,
        reward=0.0,
        detail=f"the final workspace cannot be judged: {problem}",
        feedback=f"Your final workspace cannot be judged: {problem}.",
    )


ExecStatus = Literal["ok", "error", "timeout", "memory_limit", "output_limit", "killed"]


class Snapshot(Record):
    """A sandbox workspace captured after a run, to start a later run from it.

    ``archive`` is an uncompressed tar of the workspace's directories and regular files (links
    and special files are not kept). In JSON it travels as base64.
    """

    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")

    archive: bytes

    def files(self) -> dict[str, bytes]:
        """Every regular file, keyed by its path relative to the workspace."""
        import io
        import tarfile

        with tarfile.open(fileobj=io.BytesIO(self.archive), mode="r:") as tar:
            return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


class ExecResult(Record):
    """The outcome of one sandboxed run. A limit that was hit is a status, not an exception."""

    status: ExecStatus
    exit_code: int | None = Field(description="None when killed by a signal or never started")
    stdout: str = ""
    stderr: str = ""
    wall_s: float = Field(ge=0, description="wall-clock seconds, start to reap")
    cpu_s: float | None = Field(default=None, description="CPU seconds used, when measured")
    detail: str = Field(default="", description="why the run ended as it did")
    snapshot: Snapshot | None = Field(default=None, description="the workspace after the run, when asked for")
    sandbox_replaced: bool = Field(
        default=False, description="the sandbox broke during or after this run and was replaced by a fresh one"
    )
    environment: str | None = Field(default=None, description="hash of the environment the run used, if any")

    @property
    def ok(self) -> bool:
        return self.status == "ok"


StopReason = Literal[
    "done", "max_tokens", "max_turns", "repetition", "repeated_action", "predicate", "error", "context_budget"
]
"""Why an episode ended: ``done`` (answered or submitted), a budget, or an early stop.
``context_budget``: the next turn did not fit the episode's context budget."""


class Turn(Record):
    """One step of an episode: text the model generated, or an observation fed back to it."""

    role: Literal["assistant", "observation"]
    text: str
    token_ids: tuple[int, ...] = ()
    logprobs: tuple[float, ...] = Field(default=(), description="per generated token; empty for observations")
    tool: str | None = Field(default=None, description="the tool an assistant turn called, if any")
    generated_tokens: int = Field(
        default=0, ge=0, description="tokens generated (a served model's count, when it returns text and no ids)"
    )

    @model_validator(mode="after")
    def _lengths(self) -> Turn:
        if self.logprobs and len(self.logprobs) != len(self.token_ids):
            raise ValueError("logprobs and token_ids differ in length")
        return self


class Segment(Record):
    """One context an episode's model saw, as a training row: ``prompt_ids`` then ``completion_ids``.

    ``loss_mask`` is 1 on the tokens generated while this was the context, 0 on everything
    else (observations, and earlier turns carried over from a previous segment);
    ``logprobs`` are the sampler's log-probs where the mask is 1, 0.0 elsewhere;
    ``token_versions`` the weights version that sampled each token where the mask is 1, 0
    elsewhere (empty when the sampler did not tag its tokens).
    """

    prompt_ids: tuple[int, ...] = ()
    completion_ids: tuple[int, ...] = ()
    logprobs: tuple[float, ...] = ()
    loss_mask: tuple[int, ...] = ()
    token_versions: tuple[int, ...] = ()

    @model_validator(mode="after")
    def _aligned(self) -> Segment:
        _check_aligned(self.completion_ids, self.logprobs, self.loss_mask, self.token_versions)
        return self


def _check_aligned(
    completion_ids: tuple[int, ...],
    logprobs: tuple[float, ...],
    loss_mask: tuple[int, ...],
    token_versions: tuple[int, ...] = (),
) -> None:
    n = len(completion_ids)
    if len(logprobs) not in (0, n) or len(loss_mask) not in (0, n) or len(token_versions) not in (0, n):
        raise ValueError(
            f"completion_ids ({n}), logprobs ({len(logprobs)}), loss_mask ({len(loss_mask)}) "
            f"and token_versions ({len(token_versions)}) must have the same length"
        )
    if any(m not in (0, 1) for m in loss_mask):
        raise ValueError("loss_mask holds only 0 and 1")


class Trajectory(Record):
    """One sampled episode, exactly as trained on.

    ``completion_ids`` is every token after the prompt: what the model generated and the
    observation tokens inserted between turns. ``loss_mask`` is 1 on generated tokens and 0 on
    observations; ``logprobs`` are the sampler's log-probs (0.0 where the mask is 0).

    When a context budget rewrote the context mid-episode (older observations dropped), the
    model saw several contexts: ``segments`` holds the earlier ones, and the fields above are
    the last. Each generated token has mask 1 in exactly one of them, the one it was sampled
    from; ``contexts()`` lists them all, in order, as training rows.
    """

    id: str
    task_id: str
    domain: str
    group_id: str = Field(description="samples of one prompt share a group (GRPO baselines)")
    sample_index: int = Field(default=0, ge=0)
    prompt: tuple[Message, ...] = Field(default=(), description="the chat messages the episode started from")
    prompt_ids: tuple[int, ...] = ()
    completion_ids: tuple[int, ...] = ()
    logprobs: tuple[float, ...] = ()
    loss_mask: tuple[int, ...] = ()
    token_versions: tuple[int, ...] = Field(
        default=(), description="weights version that sampled each completion token (0 on observations)"
    )
    turns: tuple[Turn, ...] = ()
    response: str = Field(default="", description="the final answer text that was verified")
    reward: float | None = None
    score: Score | None = None
    stop_reason: StopReason = "done"
    policy_version: int = Field(
        default=0, ge=0, description="weights version that sampled it (the oldest, when tokens carry several)"
    )
    environment: str | None = Field(default=None, description="hash of the environment its tools and verifier ran in")
    scene: str | None = Field(
        default=None, description="sha256 of its final workspace, kept in the run's scene store (workspace episodes)"
    )
    final_workspace: Snapshot | None = Field(
        default=None, exclude=True, description="the final workspace, in memory only: stores keep it as a scene"
    )
    timings: dict[str, float] = Field(default_factory=dict, description="seconds per phase")
    segments: tuple[Segment, ...] = Field(
        default=(), description="earlier contexts, when a context budget rewrote the context (the last is above)"
    )
    context_tokens: tuple[int, ...] = Field(
        default=(), description="tokens in the model's context at the start of each of its turns"
    )
    truncations: int = Field(default=0, ge=0, description="observations cut in the middle to fit the context budget")
    drops: int = Field(default=0, ge=0, description="older observations dropped to fit the context budget")
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _aligned(self) -> Trajectory:
        _check_aligned(self.completion_ids, self.logprobs, self.loss_mask, self.token_versions)
        return self

    def contexts(self) -> tuple[Segment, ...]:
        """Every context the model saw, in order: the training rows of this trajectory."""
        last = Segment(
            prompt_ids=self.prompt_ids,
            completion_ids=self.completion_ids,
            logprobs=self.logprobs,
            loss_mask=self.loss_mask,
            token_versions=self.token_versions,
        )
        return (*self.segments, last)
