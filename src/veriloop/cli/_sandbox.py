"""``veriloop sandbox ...``: run a command in the sandbox, or serve the sandbox over HTTP."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

app = typer.Typer(help="Run code in the isolated sandbox, or serve it over HTTP.", no_args_is_help=True)


def _placed_files(specs: list[str]) -> dict[str, bytes]:
    from veriloop.core import UserError

    files = {}
    for spec in specs:
        name, sep, source = spec.partition("=")
        if not sep or not name or not source:
            raise UserError(f"--file {spec!r}: expected NAME=PATH (NAME inside the workspace, PATH on this machine)")
        path = Path(source)
        if not path.is_file():
            raise UserError(f"--file {spec!r}: {path} is not a readable file")
        files[name] = path.read_bytes()
    return files


def _limits(timeout: float, memory_mb: int):
    from pydantic import ValidationError

    from veriloop.core import UserError, describe_validation_error
    from veriloop.sandbox import Limits

    try:
        return Limits(timeout_s=timeout, memory_mb=memory_mb)
    except ValidationError as exc:
        raise UserError(f"bad limits: {describe_validation_error(exc)}") from None


@app.command("run", context_settings={"allow_interspersed_args": False})
def run(
    cmd: list[str] = typer.Argument(..., help="the command and its arguments (put them after --)"),
    timeout: float = typer.Option(10.0, "--timeout", help="wall-clock limit, seconds"),
    memory_mb: int = typer.Option(512, "--memory-mb", help="address space limit per process, MiB"),
    network: bool = typer.Option(False, "--network", help="give the run the host's network (off by default)"),
    file: list[str] = typer.Option([], "--file", help="NAME=PATH: copy PATH into the workspace as NAME (repeatable)"),
    stdin_file: Path | None = typer.Option(None, "--stdin-file", help="feed this file to the command's stdin"),
    env: str | None = typer.Option(None, "--env", help="run on this environment (veriloop env build)"),
) -> int:
    """Run CMD in a fresh sandbox; print the ExecResult as one JSON object.

    Exits 0 when the command exited 0, 1 for any other outcome, 2 on bad arguments.
    """
    from veriloop.core import UserError
    from veriloop.sandbox import Sandbox

    limits = _limits(timeout, memory_mb)
    if stdin_file is not None and not stdin_file.is_file():
        raise UserError(f"--stdin-file: {stdin_file} is not a readable file")
    stdin = stdin_file.read_bytes() if stdin_file is not None else None
    with Sandbox(limits=limits, workers=1, network=network, environment=env) as sandbox:
        result = sandbox.run(cmd, files=_placed_files(file), stdin=stdin)
    typer.echo(result.model_dump_json(exclude={"snapshot"}))
    return 0 if result.ok else 1


@app.command("serve")
def serve(
    host: str = typer.Option("127.0.0.1", "--host", help="address to listen on"),
    port: int = typer.Option(8080, "--port", min=0, max=65535),
    token: str | None = typer.Option(
        None, "--token", envvar="VERILOOP_SANDBOX_TOKEN", help="require 'Authorization: Bearer TOKEN'"
    ),
    workers: int = typer.Option(2, "--workers", min=1, max=256, help="sandboxes running at once"),
    timeout: float = typer.Option(10.0, "--timeout", help="most wall-clock seconds a request may ask for"),
    memory_mb: int = typer.Option(512, "--memory-mb", help="most memory a request may ask for, MiB"),
    max_body_mb: float = typer.Option(16.0, "--max-body-mb", help="largest request body, MiB"),
    max_pending: int = typer.Option(64, "--max-pending", min=0, help="requests that may wait for a sandbox"),
    env: str | None = typer.Option(None, "--env", help="serve sandboxes on this environment (veriloop env build)"),
) -> None:
    """Serve SandboxFusion's POST /run_code (and POST /v1/exec for the remote backend).

    Without --token only loopback clients are answered, and only a loopback address may be used.
    """
    from veriloop.core import UserError
    from veriloop.sandbox import Sandbox
    from veriloop.sandbox import create_app, is_loopback

    if token is None and not is_loopback(host):
        raise UserError(f"refusing to listen on {host} without --token: anyone who can reach it could run code")
    if token is not None and not token.strip():
        raise UserError("--token is empty")
    limits = _limits(timeout, memory_mb)
    import signal

    import uvicorn

    # uvicorn re-raises SIGTERM after its graceful shutdown; exit normally then, so that the
    # sandboxes below are closed and their cgroups removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with Sandbox(limits=limits, workers=workers, environment=env) as sandbox:
        app = create_app(sandbox, token=token, max_body_bytes=int(max_body_mb * (1 << 20)), max_pending=max_pending)
        typer.echo(f"serving the sandbox on http://{host}:{port} ({workers} workers)", err=True)
        uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
