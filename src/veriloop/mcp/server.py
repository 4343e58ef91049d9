"""veriloop's own MCP server: a calculator and the files of its working directory, over stdio.

    python -I -m veriloop.mcp.server [--root DIR]

Tools:

- ``calculate(expression)``: arithmetic on integers and decimals with ``+ - * / // % **`` and
  parentheses, read as a syntax tree and evaluated node by node (never ``eval``); integers past
  ``MAX_RESULT_BITS`` bits, non-real and non-finite results are refused.
- ``list_files(path=".")``, ``read_file(path)``, ``write_file(path, content)``: files under the
  root (``--root``, default: the working directory). A path that resolves outside the root,
  through ``..``, an absolute path or a link, is refused.

A refused or failing call raises, and the MCP SDK turns that into a tool result marked as an
error whose text the model reads. Replies are capped (``MAX_READ_BYTES``, ``MAX_LISTED``) so
that no call can produce a message a client would refuse.

An episode runs it in the sandbox (``veriloop.mcp.VERILOOP_TOOLS``), where its root is the box's
private ``/tmp``: the root check keeps the model's paths in its workspace, and the sandbox is
what contains the process. Its tools use ``mcp`` (and its pydantic) and the standard library only.
"""

from __future__ import annotations

import argparse
import ast
import math
import operator
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

from mcp.server.fastmcp import FastMCP
from pydantic import Field

SERVER_NAME = "veriloop-tools"
MAX_EXPRESSION_CHARS = 2000
MAX_RESULT_BITS = 4096
"""Largest integer a calculation may produce (about 1,233 decimal digits)."""
MAX_READ_BYTES = 64 << 10
MAX_LISTED = 500

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}


def calculate(expression: str) -> int | float:
    """The value of an arithmetic expression; ``ValueError`` says why one is refused."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ValueError(f"the expression is longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
        return _value(tree.body)
    except SyntaxError as exc:
        raise ValueError(f"not an arithmetic expression: {exc.msg}") from None
    except RecursionError:
        raise ValueError("the expression is nested too deeply") from None
    except (ArithmeticError, TypeError) as exc:  # division by zero, float overflow
        raise ValueError(str(exc)) from None


def _value(node: ast.expr) -> int | float:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _checked(_UNARY[type(node.op)](_value(node.operand)))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _value(node.left), _value(node.right)
        if isinstance(node.op, ast.Pow):
            _check_power(left, right)
        return _checked(_BINARY[type(node.op)](left, right))
    raise ValueError(f"{ast.unparse(node)!r} is not arithmetic: use numbers, + - * / // % ** and parentheses")


def _check_power(base: int | float, exponent: int | float) -> None:
    """Refuse a power whose integer result would pass ``MAX_RESULT_BITS`` before computing it."""
    if isinstance(base, int) and isinstance(exponent, int) and exponent > 0 and abs(base) > 1:
        if exponent * math.log2(abs(base)) > MAX_RESULT_BITS:
            raise ValueError(f"the result has more than {MAX_RESULT_BITS} bits")


def _checked(value: object) -> int | float:
    if isinstance(value, int) and value.bit_length() > MAX_RESULT_BITS:
        raise ValueError(f"the result has more than {MAX_RESULT_BITS} bits")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("the result is not a finite number")
    if not isinstance(value, int | float):
        raise ValueError("the result is not a real number")
    return value


class Workspace:
    """The files under ``root``; every path is resolved and must stay under it."""

    def __init__(self, root: Path):
        self.root = root.resolve()

    def path(self, relative: str) -> Path:
        resolved = (self.root / relative).resolve()
        if resolved != self.root and self.root not in resolved.parents:
            raise ValueError(f"{relative!r} is outside the workspace")
        return resolved

    def shown(self, path: Path) -> str:
        """``path`` as the model names it: relative to the root, '/' after a directory."""
        relative = path.relative_to(self.root).as_posix()
        return relative + "/" if path.is_dir() else relative

    def list(self, relative: str) -> str:
        folder = self.path(relative)
        if not folder.is_dir():
            raise ValueError(f"{relative!r} is not a directory")
        entries = sorted(folder.rglob("*"))
        lines = [self.shown(p) for p in entries[:MAX_LISTED]]
        if len(entries) > MAX_LISTED:
            lines.append(f"... and {len(entries) - MAX_LISTED} more")
        return "\n".join(lines) if lines else "(empty)"

    def read(self, relative: str) -> str:
        path = self.path(relative)
        try:
            with path.open("rb") as file:
                data = file.read(MAX_READ_BYTES + 1)
        except OSError as exc:
            raise ValueError(f"{relative}: {exc.strerror}") from None
        text = data[:MAX_READ_BYTES].decode("utf-8", errors="replace")
        return text + f"\n[cut at {MAX_READ_BYTES} bytes]" if len(data) > MAX_READ_BYTES else text

    def write(self, relative: str, content: str) -> str:
        path = self.path(relative)
        data = content.encode("utf-8")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        except OSError as exc:
            raise ValueError(f"{relative}: {exc.strerror}") from None
        return f"wrote {len(data)} bytes to {self.shown(path)}"


def build_server(root: Path) -> FastMCP:
    """The server with its four tools, its files under ``root``."""
    server = FastMCP(SERVER_NAME, log_level="WARNING")
    workspace = Workspace(root)
    # The text alone: a structured copy of it would double each reply.
    text_only = server.tool(structured_output=False)

    @server.tool(name="calculate", structured_output=False)
    def calculate_tool(
        expression: Annotated[str, Field(description="e.g. (17 + 4) * 3 / 2 or 2 ** 10 % 7")],
    ) -> str:
        """Evaluate an arithmetic expression: numbers, + - * / // % ** and parentheses."""
        return str(calculate(expression))

    @text_only
    def list_files(path: Annotated[str, Field(description="a directory of the workspace")] = ".") -> str:
        """List the files under a directory of the workspace, recursively ('/' ends a directory)."""
        return workspace.list(path)

    @text_only
    def read_file(path: Annotated[str, Field(description="a file of the workspace")]) -> str:
        """Read a text file of the workspace."""
        return workspace.read(path)

    @text_only
    def write_file(
        path: Annotated[str, Field(description="a file of the workspace; missing directories are made")],
        content: Annotated[str, Field(description="the whole new text of the file")],
    ) -> str:
        """Write a text file of the workspace, replacing what it held."""
        return workspace.write(path, content)

    return server


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m veriloop.mcp.server", description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="the workspace (default: the working directory)")
    args = parser.parse_args(argv)
    build_server(args.root).run("stdio")


if __name__ == "__main__":
    main()
