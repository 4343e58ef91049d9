"""Finding the program in raw model text.

Rules, in order: the last fenced block (```` ``` ```` or ``~~~``) wins, preferring blocks
tagged as the task's language (Python unless it says otherwise; ``FENCE_TAGS``) or untagged
over blocks in other languages; an unclosed final fence (a generation cut off by its token
limit) counts as a block running to the end. Text without a fence is taken as code. For
completion-style tasks (HumanEval), a fence-less completion that does not define the entry
point continues the prompt's code and is joined to it.
"""

from __future__ import annotations

import re

_FENCE = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[\w+#.-]*)[^\n]*$", re.MULTILINE)

# Fence tags that name each language the sandbox runs (``veriloop.sandbox.LANGUAGES``).
FENCE_TAGS: dict[str, frozenset[str]] = {
    "python": frozenset({"python", "py", "python3", "py3", "ipython", "pycon"}),
    "cpp": frozenset({"cpp", "c++", "cxx", "cc"}),
    "c": frozenset({"c"}),
    "bash": frozenset({"bash", "sh", "shell"}),
}
LANGUAGE_NAMES = {"python": "Python", "cpp": "C++", "c": "C", "bash": "Bash"}  # as a person writes them


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """Every fenced block as ``(language tag, body)``, in order of appearance."""
    blocks: list[tuple[str, str]] = []
    position = 0
    while True:
        opening = _FENCE.search(text, position)
        if opening is None:
            return blocks
        fence = opening.group("fence")
        closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.MULTILINE)
        body_start = opening.end() + 1
        end = closing.search(text, body_start)
        body = text[body_start : end.start() if end else len(text)]
        blocks.append((opening.group("lang").lower(), body.rstrip("\n") + "\n" if body.strip() else ""))
        if end is None:
            return blocks
        position = end.end()


def extract_code(text: str) -> tuple[str, bool]:
    """``(code, fenced)``: the Python code in a model's answer, and whether it came from a fence."""
    blocks = fenced_blocks(text)
    return (_last_block(blocks, "python")[1], True) if blocks else (text, False)


def extract_program(text: str, language: str = "python") -> tuple[str, str | None]:
    """``(code, fence language)``: the program in a model's answer to a task in ``language``, and
    the language its fence names (a key of ``FENCE_TAGS``); None when untagged, unfenced, or
    tagged with a name not known here (``text``, ``java``)."""
    blocks = fenced_blocks(text)
    if not blocks:
        return text, None
    tag, body = _last_block(blocks, language)
    return body, next((name for name, tags in FENCE_TAGS.items() if tag in tags), None)


def _last_block(blocks: list[tuple[str, str]], language: str) -> tuple[str, str]:
    """The last non-empty block tagged ``language`` or untagged, else the last non-empty block."""
    tags = FENCE_TAGS.get(language, frozenset({language})) | {""}
    filled = [(tag, body) for tag, body in blocks if body]
    preferred = [(tag, body) for tag, body in filled if tag in tags]
    return (preferred or filled or [("", "")])[-1]


_DEF = re.compile(r"^[ \t]*(?:async[ \t]+)?def[ \t]+(\w+)[ \t]*\(", re.MULTILINE)


def defines_function(code: str, name: str) -> bool:
    """Whether ``code`` has a line defining function ``name`` (``def name(``, async included)."""
    return name in _DEF.findall(code)


def candidate_program(response: str, prompt_code: str = "", entry_point: str | None = None) -> str:
    """The full program to run for a response to a function-writing task.

    A fence-less answer that does not define ``entry_point`` is a completion: it is appended
    to ``prompt_code``. Otherwise the extracted code follows the prompt's code, so helpers
    defined in the prompt stay available and the answer's definitions take precedence.
    """
    code, fenced = extract_code(response)
    if not prompt_code:
        return code
    if not fenced and entry_point and not defines_function(code, entry_point):
        return prompt_code + code
    return _hoist_future_imports(prompt_code.rstrip("\n") + "\n\n\n" + code)


_FUTURE = re.compile(r"^from[ \t]+__future__[ \t]+import[^\n]*\n?", re.MULTILINE)


def _hoist_future_imports(program: str) -> str:
    """``from __future__`` lines must come first; joining two sources can bury them."""
    futures = _FUTURE.findall(program)
    if not futures:
        return program
    return "".join(line.rstrip("\n") + "\n" for line in dict.fromkeys(futures)) + _FUTURE.sub("", program)
