"""Where an episode's MCP servers are: a command run in the sandbox over stdio, or a URL.

A config names its servers as a list of entries, each one of:

    {"command": ["python", "-I", "-m", "veriloop.mcp.server"], "env": {"KEY": "value"}}
    {"url": "http://127.0.0.1:8000/mcp"}

A stdio server runs in the sandbox's isolated process (``veriloop.sandbox.start_isolated_process``)
under the entry's limits: no network, nothing of the host writable, its working directory the
box's private ``/tmp``. It runs on the host's interpreter and packages, read-only (so veriloop's
own server, whose tools run no model-written code, imports the same ``mcp`` as the client), or
on a built ``environment`` that holds nothing of the host's: the choice for a server that runs
code the model wrote. A URL server runs wherever it runs; only its deadlines apply. ``McpServer``
is one entry, ready to be a field of a larger config (``tuple[McpServer, ...]``);
``mcp_servers`` validates a list on its own, as a ``UserError`` naming each bad field.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator, model_validator

from veriloop.core import UserError, describe_validation_error
from veriloop.sandbox import Limits

_SERVER_NAME = re.compile(r"[A-Za-z0-9_-]{1,32}\Z")
_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_BOX_FIELDS = ("env", "environment", "max_message_bytes", "memory_mb", "max_processes", "cpu_s", "disk_mb")
"""Fields that shape the sandbox a stdio server runs in; a URL server has none."""


class McpServer(BaseModel):
    """One MCP server of an episode: ``command`` (stdio, in the sandbox) or ``url`` (streamable HTTP).

    Every exchange has a deadline: starting and listing tools ``start_timeout_s``, each tool call
    ``timeout_s``. A server past one, or one that exits, breaks the protocol or sends a message
    over ``max_message_bytes``, is an infrastructure failure (``McpServerError``), never a tool
    result the model sees.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    command: tuple[str, ...] | None = Field(
        default=None,
        description="a stdio server's command line, run in the sandbox (`python` there is the host's interpreter)",
    )
    env: dict[str, str] = Field(default_factory=dict, description="stdio: variables added to the server's environment")
    environment: str | None = Field(
        default=None,
        description="stdio: run on this built environment (`veriloop env build`) instead of the host's interpreter "
        "and packages; for a server that runs the model's code",
    )
    url: str | None = Field(default=None, description="a streamable HTTP server's endpoint, http(s)://HOST[:PORT]/PATH")
    name: str | None = Field(
        default=None,
        description="what prefixes its tools' names where two servers offer the same name "
        "(1-32 letters, digits, '_' or '-'); default: the name the server reports",
    )
    start_timeout_s: float = Field(
        default=60.0, gt=0, le=3600, description="seconds the server may take to start and list its tools"
    )
    timeout_s: float = Field(
        default=30.0, gt=0, le=3600, description="seconds one tool call may take; past it the server is ended"
    )
    max_message_bytes: int = Field(
        default=1 << 20, ge=1024, le=1 << 30, description="stdio: the longest message the server may send, in bytes"
    )
    memory_mb: int = Field(
        default=512, ge=64, le=1 << 20, description="stdio: address space of each of its processes, MiB"
    )
    max_processes: int = Field(default=32, ge=4, le=4096, description="stdio: its processes and threads alive at once")
    cpu_s: float = Field(
        default=300.0, gt=0, le=86400, description="stdio: CPU seconds each of its processes may use in its life"
    )
    disk_mb: int = Field(default=64, ge=1, le=1 << 20, description="stdio: size of its working directory (/tmp), MiB")

    @field_validator("command")
    @classmethod
    def _command_has_a_program(cls, command: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if command is not None and (not command or not all(command)):
            raise ValueError("a command is a non-empty list of non-empty words, e.g. ['python', '-m', 'my_server']")
        return command

    @field_validator("env")
    @classmethod
    def _variable_names(cls, env: dict[str, str]) -> dict[str, str]:
        for key, value in env.items():
            if not _VARIABLE_NAME.match(key):
                raise ValueError(f"{key!r} is not an environment variable name (letters, digits, '_')")
            if "\0" in value:
                raise ValueError(f"the value of {key} holds a NUL character")
        return env

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str | None) -> str | None:
        if url is not None and not re.match(r"https?://[^/\s]+", url):
            raise ValueError(f"{url!r} is not an http:// or https:// URL")
        return url

    @field_validator("name")
    @classmethod
    def _name_fits_a_tool_name(cls, name: str | None) -> str | None:
        if name is not None and not _SERVER_NAME.match(name):
            raise ValueError(f"{name!r}: a server name is 1-32 letters, digits, '_' or '-'")
        return name

    @model_validator(mode="after")
    def _one_transport(self) -> McpServer:
        if (self.command is None) == (self.url is None):
            raise ValueError(
                "give either a command (a stdio server, run in the sandbox) or a url (a streamable HTTP server)"
            )
        if self.url is not None:
            boxed = [f for f in _BOX_FIELDS if f in self.model_fields_set]
            if boxed:
                raise ValueError(f"{', '.join(boxed)} apply to stdio servers, which run in the sandbox; not to a url")
        return self

    @property
    def label(self) -> str:
        """How messages name the server: its ``name``, or its command or URL."""
        if self.name:
            return self.name
        return self.url if self.url is not None else re.sub(r"\s+", " ", " ".join(self.command or ()))[:80]

    def limits(self) -> Limits:
        """The isolated process's limits of a stdio server (``veriloop.sandbox.Limits``)."""
        return Limits(
            timeout_s=self.timeout_s,
            cpu_s=self.cpu_s,
            memory_mb=self.memory_mb,
            max_processes=self.max_processes,
            max_file_mb=self.disk_mb,
            disk_mb=self.disk_mb,
        )


VERILOOP_TOOLS = McpServer(command=("python", "-I", "-m", "veriloop.mcp.server"))
"""veriloop's own server (``veriloop.mcp.server``): a calculator and the files of its working directory."""

_SERVER_LIST = TypeAdapter(tuple[McpServer, ...])


def mcp_servers(entries: Any, where: str = "mcp_servers") -> tuple[McpServer, ...]:
    """``entries`` (a list of dicts or ``McpServer``) checked; a ``UserError`` names every bad
    field by its place, ``WHERE: field 'INDEX.FIELD': ...``."""
    try:
        return _SERVER_LIST.validate_python(entries)
    except ValidationError as exc:
        raise UserError(f"{where}: {describe_validation_error(exc)}") from None
