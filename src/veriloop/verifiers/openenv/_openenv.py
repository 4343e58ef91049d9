"""The ``openenv`` verifier kind: the reward an OpenEnv environment gives an episode.

A task names the environment by its server's address (``url``), or by its app (``app``, a
``module:attribute`` on the built ``environment``: its server is started in the sandbox for each
episode, ``_app_server``, with the variables ``app_env``), and the options of its reset
(``reset``, e.g. a seed). In an episode (``veriloop.rollout``) each model turn becomes one action
and the environment's observations are shown to the model; the reward is the one the environment
gives at ``done``. Offline (``veriloop verify`` on a response with ``turns``), the
check replays the model's turns on a fresh session and takes the reward the same way, so it
scores what the live episode scored when the environment is deterministic for its reset options.

A turn becomes an action as follows: with ``action_field``, the action is ``{action_field: the
turn's text}``; without it, the turn must give a JSON object (in a fenced block, or as its last
object), nested at most ``MAX_ACTION_DEPTH`` levels deep, which is sent as it is. A turn that
gives no action, or an action the environment refuses as invalid, is not a step: the model is
told why and the episode goes on. The environment's own failures (unreachable, an error while
stepping, answers outside the protocol) are infra errors, never a reward of 0. What the model is
shown of the environment's answers has lone surrogates replaced (``utf8_safe``), so an action
that smuggles one in through a JSON escape cannot break the tokeniser or the stores.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from veriloop.core import Task, UserError
from veriloop.sandbox import Limits, check_variables
from veriloop.verifiers._registry import Answer, GraderError, Verdict, VerifierConfig, register_verifier
from veriloop.verifiers.answers._json_schema import _NOT_JSON, RefusedJson, extract_json
from veriloop.verifiers.openenv._app_server import APP_DIR, AppServer, AppServerSession
from veriloop.verifiers.openenv._protocol import OpenEnvError, OpenEnvSession, StepResult, session_url, utf8_safe

_VALIDATION_ERROR = "VALIDATION_ERROR"
MAX_ACTION_DEPTH = 100
"""The deepest nesting of lists and objects an action may have (the action object is level 1).
Deeper actions are not sent: writing one out, or the environment's reading it (a Python server's
JSON reader stops near 1,000 levels), could exhaust an interpreter's recursion."""
_APP_REFERENCE = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*(\(\))?\Z")


class OpenEnvConfig(VerifierConfig):
    url: str | None = Field(
        default=None, description="the environment server's address, http://HOST:PORT or unix:///PATH"
    )
    app: str | None = Field(
        default=None,
        description="instead of url: the environment's ASGI app, module:attribute or module:factory(), "
        "served in the sandbox for each episode",
    )
    environment: str | None = Field(
        default=None, description="app: the built environment (`veriloop env build`) its server runs on"
    )
    app_dir: str | None = Field(
        default=None,
        description="app: a directory of its source, mounted read-only and first on its sys.path "
        "(unset: the app is a package of the environment)",
    )
    start_timeout_s: float = Field(default=60.0, gt=0, le=600, description="app: limit of its server's start")
    memory_mb: int = Field(default=1024, ge=64, le=1 << 20, description="app: address space of its server, MiB")
    max_processes: int = Field(default=64, ge=4, le=4096, description="app: its server's processes and threads")
    disk_mb: int = Field(
        default=128,
        ge=1,
        le=1 << 20,
        description="app: size of its server's /tmp (also its HOME), the one place it writes, MiB",
    )
    app_env: dict[str, str] = Field(
        default_factory=dict,
        description="app: environment variables of its server; {app_dir} in a value is where the server sees app_dir",
    )
    reset: dict[str, Any] = Field(default_factory=dict, description="options of the reset, e.g. {seed: 3}")
    action_field: str | None = Field(
        default=None,
        description="the action field a turn's text fills; unset: a turn gives the action as a JSON object",
    )
    observation_field: str | None = Field(
        default=None, description="the observation field shown to the model; unset: the observation as JSON"
    )
    reward: Literal["final", "sum"] = Field(
        default="final", description="final: the reward given at done; sum: the sum of every step's reward"
    )
    max_steps: int = Field(default=32, ge=1, le=1000, description="steps after which an unfinished episode scores 0")
    pass_reward: float = Field(default=1.0, description="the reward at or above which the episode passed")
    timeout_s: float = Field(default=30.0, gt=0, le=600, description="limit of connecting and of each answer")

    @field_validator("url")
    @classmethod
    def _address(cls, url: str | None) -> str | None:
        if url is None:
            return None
        try:
            session_url(url)
        except OpenEnvError as exc:
            raise ValueError(str(exc)) from None
        return url.rstrip("/")

    @field_validator("app")
    @classmethod
    def _app_reference(cls, app: str | None) -> str | None:
        if app is not None and not _APP_REFERENCE.match(app):
            raise ValueError(f"{app!r} is not an app reference; give module:attribute or module:factory()")
        return app

    @field_validator("app_dir")
    @classmethod
    def _absolute(cls, folder: str | None) -> str | None:
        return None if folder is None else os.path.abspath(folder)

    @field_validator("app_env")
    @classmethod
    def _variables(cls, variables: dict[str, str]) -> dict[str, str]:
        try:
            return check_variables(variables)
        except UserError as exc:
            raise ValueError(f"app_env: {exc}") from None

    @model_validator(mode="after")
    def _one_server(self) -> OpenEnvConfig:
        if (self.url is None) == (self.app is None):
            raise ValueError("give the environment's url (a running server) or its app (started per episode)")
        if self.app is not None and self.environment is None:
            raise ValueError("an app needs the environment it runs on: environment: NAME (veriloop env build)")
        if self.app is None and self.app_env:
            raise ValueError("app_env sets variables of an app's server; a server at a url has its own")
        if self.app_dir is None and (name := next((k for k, v in self.app_env.items() if APP_DIR in v), None)):
            raise ValueError(f"app_env: {name} names {APP_DIR}, but no app_dir is given")
        return self

    @property
    def where(self) -> str:
        """The environment, as messages name it: its address, or its app."""
        return self.url if self.url is not None else f"{self.app} (environment {self.environment})"

    def server_limits(self) -> Limits:
        """The sandbox limits of an app's server."""
        # A cache file (a dataset's, say) may fill the disk: the server is the environment's code, not the model's.
        return Limits(
            memory_mb=self.memory_mb, max_processes=self.max_processes, disk_mb=self.disk_mb, max_file_mb=self.disk_mb
        )


@contextmanager
def environment_session(config: OpenEnvConfig) -> Iterator[OpenEnvSession]:
    """A session on the environment, for one episode: on its server at ``url``, or on a server of
    its ``app`` started for it in the sandbox and gone when the session ends. OpenEnvError when
    the server cannot be reached or does not start."""
    if config.app is None:
        assert config.url is not None
        with OpenEnvSession(config.url, config.timeout_s) as session:
            yield session
        return
    assert config.environment is not None
    server = AppServer(
        config.app,
        config.environment,
        config.server_limits(),
        source_dir=config.app_dir,
        variables=config.app_env,
        start_timeout_s=config.start_timeout_s,
    )
    with server, AppServerSession(server, config.timeout_s) as session:
        yield session


class InvalidAction(ValueError):
    """A turn that gives no action the environment takes (its message is shown to the model)."""


def action_of(config: OpenEnvConfig, text: str) -> dict[str, Any]:
    """The action a model turn gives (see the module docstring); InvalidAction otherwise."""
    if config.action_field is not None:
        return {config.action_field: text.strip()}
    try:
        value = extract_json(text, "auto")
    except RefusedJson as exc:
        raise InvalidAction(f"the action is not standard JSON: {exc}") from None
    if value is _NOT_JSON or not isinstance(value, dict):
        raise InvalidAction('no action found: give the action as one JSON object, e.g. {"field": "value"}')
    if _depth(value) > MAX_ACTION_DEPTH:
        raise InvalidAction(f"the action is nested more than {MAX_ACTION_DEPTH} levels deep")
    return value


def _depth(value: Any) -> int:
    """How deeply lists and objects nest in ``value`` (a scalar is 0), counted without recursion."""
    deepest, pending = 0, [(value, 1)]
    while pending:
        item, level = pending.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is not None:
            deepest = max(deepest, level)
            pending += [(child, level + 1) for child in children]
    return deepest


def observation_text(config: OpenEnvConfig, result: StepResult) -> str:
    """What the model is shown of an observation."""
    if config.observation_field is not None and config.observation_field in result.observation:
        value = result.observation[config.observation_field]
        return utf8_safe(value) if isinstance(value, str) else json.dumps(value)
    return json.dumps(result.observation, sort_keys=True)


@dataclass
class EpisodeRecord:
    """Rewards of an episode so far: steps taken, the reward given by each, and whether it ended."""

    steps: int = 0
    rewards: tuple[float | None, ...] = ()
    done: bool = False

    def add(self, result: StepResult) -> None:
        self.steps += 1
        self.rewards += (result.reward,)
        self.done = result.done


def take_step(session: OpenEnvSession, config: OpenEnvConfig, text: str, record: EpisodeRecord) -> str:
    """Send turn ``text`` as one action; the text to show the model next (the observation, or
    why the turn was not an action). OpenEnvError when the environment itself failed."""
    try:
        action = action_of(config, text)
        result = session.step(action)
    except InvalidAction as exc:
        return f"Not an action: {exc}."
    except OpenEnvError as exc:
        if exc.code == _VALIDATION_ERROR:
            return f"The environment refused the action: {exc.detail}"
        raise
    record.add(result)
    return observation_text(config, result)


def episode_verdict(config: OpenEnvConfig, record: EpisodeRecord) -> Verdict:
    """The verdict for an episode's record (an unfinished episode scores 0)."""
    if not record.done:
        why = "it ran out of steps" if record.steps >= config.max_steps else "the turns ran out before done"
        return Verdict(
            0.0,
            False,
            detail=f"{config.where}: the episode did not finish after {record.steps} steps ({why})",
            feedback="The episode did not finish.",
        )
    given = [r for r in record.rewards if r is not None]
    reward = (record.rewards[-1] or 0.0) if config.reward == "final" else sum(given)
    passed = reward >= config.pass_reward
    return Verdict(
        reward,
        passed,
        detail=f"{config.where}: done after {record.steps} steps, reward {reward:g}",
        feedback="The episode succeeded." if passed else f"The episode ended with reward {reward:g}.",
    )


def replay(config: OpenEnvConfig, turns: Sequence[str]) -> Verdict:
    """The verdict of a fresh session that receives ``turns`` as the model's turns."""
    try:
        with environment_session(config) as session:
            start = session.reset(**config.reset)
            record = EpisodeRecord(done=start.done)
            for text in turns:
                if record.done or record.steps >= config.max_steps:
                    break
                take_step(session, config, text, record)
    except OpenEnvError as exc:
        raise GraderError(str(exc)) from None
    return episode_verdict(config, record)


@register_verifier("openenv", OpenEnvConfig)
def check_openenv(config: OpenEnvConfig, task: Task, response: str) -> Verdict:
    """Replay the response's turns (the response itself when it has none) on the environment."""
    turns = response.turns if isinstance(response, Answer) and response.turns else (str(response),)
    return replay(config, turns)
