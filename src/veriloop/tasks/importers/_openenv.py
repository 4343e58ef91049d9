"""The ``openenv`` importer: episodes of an OpenEnv environment's server as tasks, one per seed.

Each task is an ``openenv`` verifier on the server's address, reset with its own seed
(``seed_start`` to ``seed_start + size - 1``, merged into ``reset``). The prompt is ``--prompt``
when given; otherwise it is written from the server's ``/metadata`` (its description) and
``/schema`` (the fields of its action model), so the model knows what an action looks like. The
server must be running: the importer reads those two pages, and nothing is written when it cannot.

With ``--environment NAME`` the argument is the environment's app instead (``module:attribute``
on that built environment, its source in ``--app-dir`` when it is not one of its packages, the
variables of its server in ``--app-env``): the importer starts its server in the sandbox to read
the two pages, and each task names the app, so every episode starts a server of its own.
"""

from __future__ import annotations

import os
import re
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator

from veriloop.core import Task, UserError
from veriloop.tasks._sources import SourceOptions, register_importer


class OpenEnvOptions(SourceOptions):
    url: str = Field(
        description="the environment server's address, http://HOST:PORT; with --environment, its app, module:attribute"
    )
    environment: str | None = Field(default=None, description="the built environment the app runs on")
    app_dir: str | None = Field(default=None, description="the app's source directory (unset: a package)")
    app_env: dict[str, str] = Field(
        default_factory=dict,
        description="variables of the app's server: NAME=VALUE, or a JSON object of several ({app_dir}: where it sees --app-dir)",
    )
    size: int = Field(default=100, ge=1, le=1_000_000, description="number of tasks: one per seed")
    seed_start: int = Field(default=0, ge=0, description="the first task's reset seed")
    reset: dict[str, Any] = Field(default_factory=dict, description='more reset options, as JSON: {"level": 2}')
    prompt: str | None = Field(default=None, description="the prompt of every task (default: from /metadata, /schema)")
    action_field: str | None = Field(default=None, description="the action field a turn's text fills (unset: JSON)")
    observation_field: str | None = Field(default=None, description="the observation field shown (unset: all)")
    max_steps: int = Field(default=32, ge=1, le=1000, description="steps after which an episode scores 0")
    pass_reward: float = Field(default=1.0, description="the reward at or above which an episode passed")
    reward: Literal["final", "sum"] = Field(default="final", description="the reward at done, or the sum of steps'")
    domain: str | None = Field(default=None, min_length=1, description="domain of every task (default: the name)")

    @field_validator("app_env", mode="before")
    @classmethod
    def _one_variable(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        name, has_value, text = value.partition("=")
        if not has_value:
            raise ValueError(f'{value!r}: give NAME=VALUE, or a JSON object {{"NAME": "VALUE", ...}}')
        return {name: text}

    @field_validator("app_env")
    @classmethod
    def _variable_names(cls, variables: dict[str, str]) -> dict[str, str]:
        from veriloop.sandbox import check_variables

        try:
            return check_variables(variables)
        except UserError as exc:
            raise ValueError(str(exc)) from None


def _field_line(name: str, spec: dict[str, Any], required: bool) -> str:
    kind = spec.get("type") or "/".join(str(s.get("type")) for s in spec.get("anyOf", []) if isinstance(s, dict))
    note = f": {spec['description']}" if spec.get("description") else ""
    return f"- {name} ({kind or 'any'}{', required' if required else ''}){note}"


def written_prompt(metadata: dict[str, Any], schema: dict[str, Any], action_field: str | None) -> str:
    """A prompt from the server's description and its action model."""
    description = str(metadata.get("description") or metadata.get("name") or "An environment.").strip()
    if action_field is not None:
        return f"{description}\n\nEach turn, your whole reply is sent to the environment as its {action_field!r}."
    action = schema.get("action") if isinstance(schema.get("action"), dict) else {}
    properties = {k: v for k, v in (action.get("properties") or {}).items() if k != "metadata" and isinstance(v, dict)}
    required = set(action.get("required") or [])
    fields = "\n".join(_field_line(name, spec, name in required) for name, spec in properties.items())
    example = ", ".join(f'"{name}": ...' for name in properties if name in required) or '"field": ...'
    return (
        f"{description}\n\nEach turn, reply with one action: a JSON object {{{example}}} with these fields:\n"
        f"{fields}\nThe environment answers each action until the episode ends."
    )


def _describe(options: OpenEnvOptions) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The verifier fields that name the server, and its ``/metadata`` and ``/schema``."""
    from veriloop.verifiers import OpenEnvConfig, OpenEnvError, environment_description, environment_session

    if options.environment is None:
        if options.app_env:
            raise UserError(f"openenv {options.url}: --app-env sets variables of an app's server; give --environment")
        try:
            url = OpenEnvConfig(url=options.url).url
            return {"url": url}, *environment_description(url)
        except (OpenEnvError, ValueError) as exc:
            raise UserError(f"openenv {options.url}: {exc}; start the environment's server first") from None
    server = {"app": options.url, "environment": options.environment}
    if options.app_dir is not None:
        server["app_dir"] = os.path.abspath(options.app_dir)
    if options.app_env:
        server["app_env"] = options.app_env
    try:
        config = OpenEnvConfig(**server)
        with environment_session(config) as session:
            return server, *environment_description(session.base_url, config.timeout_s)
    except ValidationError as exc:
        reasons = "; ".join(str(e["msg"]).removeprefix("Value error, ") for e in exc.errors())
        raise UserError(f"openenv {options.url}: {reasons}") from None
    except (OpenEnvError, ValueError) as exc:
        raise UserError(f"openenv {options.url}: {exc}") from None


@register_importer("openenv", OpenEnvOptions, argument="url")
def import_openenv(options: OpenEnvOptions) -> list[Task]:
    """Episodes of a running OpenEnv environment server, one task per reset seed."""
    server, metadata, schema = _describe(options)
    name = re.sub(r"[^\w.-]+", "-", str(metadata.get("name") or "openenv")).strip("-") or "openenv"
    prompt = options.prompt or written_prompt(metadata, schema, options.action_field)
    fields = {
        "action_field": options.action_field,
        "observation_field": options.observation_field,
        "max_steps": options.max_steps,
        "reward": options.reward,
        "pass_reward": options.pass_reward,
    }
    return [
        Task(
            id=f"{name}/{seed}",
            domain=options.domain or name,
            prompt=prompt,
            verifier={"kind": "openenv", **server, "reset": {**options.reset, "seed": seed}, **fields},
            metadata={"openenv": {"name": metadata.get("name"), "version": metadata.get("version")}},
        )
        for seed in range(options.seed_start, options.seed_start + options.size)
    ]
