"""``veriloop gateway``: an OpenAI-compatible server that records every call's tokens by episode."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

_ENGINES = ("hf", "vllm")


def gateway(
    model: Path = typer.Option(..., "--model", help="the model directory (Hugging Face format)"),
    engine: str = typer.Option("hf", "--engine", help="generation engine: hf or vllm"),
    host: str = typer.Option("127.0.0.1", "--host", help="address to listen on (not loopback: needs --token)"),
    port: int = typer.Option(8000, "--port", min=0, max=65535, help="port to listen on (0: a free one)"),
    token: str | None = typer.Option(
        None, "--token", envvar="VERILOOP_GATEWAY_TOKEN", help="require 'Authorization: Bearer TOKEN'"
    ),
    record: Path | None = typer.Option(None, "--record", help="append each finished episode to DIR/episodes.jsonl"),
    served_name: str | None = typer.Option(
        None, "--served-model-name", help="the model's name in /v1/models (default: the directory's name)"
    ),
    max_tokens: int = typer.Option(4096, "--max-tokens", min=1, help="most new tokens a choice may ask for"),
    max_n: int = typer.Option(16, "--max-n", min=1, help="most choices a request may ask for"),
    max_body_mb: float = typer.Option(4.0, "--max-body-mb", help="largest request body, MiB"),
    device: str = typer.Option("cpu", "--device", help="the hf engine's device (cpu, cuda)"),
) -> int:
    """Serve MODEL over OpenAI's chat completions and completions APIs, recording every call.

    Episodes are named by the X-Episode-Id header or by the base URL
    http://HOST:PORT/episodes/ID/v1; POST /v1/episodes/ID/finish ends one (with --record, it is
    appended to DIR/episodes.jsonl). A request naming no episode is an episode of its own.
    """
    from veriloop.core import UserError
    from veriloop.rollout import Gateway, GatewayLimits, check_gateway_access, create_engine

    if engine not in _ENGINES:
        raise UserError(f"--engine {engine!r}: use one of {', '.join(_ENGINES)}")
    if not (model / "config.json").is_file():
        raise UserError(f"--model {model}: not a model directory (no config.json)")
    if record is not None and record.exists() and not record.is_dir():
        raise UserError(f"--record {record}: exists and is not a directory")
    if max_body_mb <= 0:
        raise UserError(f"--max-body-mb {max_body_mb}: must be above 0")
    check_gateway_access(host, token, port)
    limits = GatewayLimits(max_tokens=max_tokens, max_n=max_n, max_body_bytes=int(max_body_mb * (1 << 20)))
    options = {"device": device} if engine == "hf" else {}  # vLLM places itself
    generator = create_engine(engine, model=str(model), **options)
    server = Gateway(
        generator,
        host=host,
        port=port,
        token=token,
        record_dir=record,
        model_name=served_name or model.resolve().name,
        limits=limits,
        hold_finished=False,
    )
    import signal

    # uvicorn re-raises SIGTERM after its graceful shutdown: exit normally, so open episodes are recorded.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    where = f" (finished episodes go to {record / 'episodes.jsonl'})" if record is not None else ""
    typer.echo(f"serving {server.calls.model_name} on {server.base_url}{where}", err=True)
    try:
        server.serve_forever()
    finally:
        server.close()
        generator.close()
    return 0
