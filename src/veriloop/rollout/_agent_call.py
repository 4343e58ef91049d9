"""``python -m veriloop.rollout._agent_call module:function [PROMPT]``: one run of an agent function.

The function is called with the prompt (the last argument, else standard input); a coroutine
function is awaited. Whatever it prints goes to standard error, so that standard output holds
only its return value: a string as it is, anything else as JSON.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import json
import sys


def main(argv: list[str]) -> int:
    target, *rest = argv
    module_name, _, function_name = target.partition(":")
    sys.path.insert(0, "")  # the working directory's modules, as `python -m` would find them
    function = getattr(importlib.import_module(module_name), function_name)
    prompt = rest[-1] if rest else sys.stdin.read()
    with contextlib.redirect_stdout(sys.stderr):
        result = function(prompt)
        if inspect.isawaitable(result):
            result = asyncio.run(_awaited(result))
    sys.stdout.write(result if isinstance(result, str) else json.dumps(result))
    sys.stdout.flush()
    return 0


async def _awaited(awaitable):
    return await awaitable


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
