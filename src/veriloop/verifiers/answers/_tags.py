"""Finding ``<answer>...</answer>`` spans in linear time.

A regex like ``<answer>(.*?)</answer>`` rescans the rest of the text from every unclosed
opening tag, so a response made of many openers costs quadratic time; verifiers run on
hostile text, so they pair the tags in one pass instead.
"""

from __future__ import annotations

import re


def tag_contents(text: str, tag: str = "answer") -> list[str]:
    """The content of every complete ``<tag>...</tag>`` in ``text`` (tag names ignore case).

    An opener repeated before its closer restarts the span: ``<a>x<a>y</a>`` gives ``y``.
    """
    openers = [m.end() for m in re.finditer(f"<{re.escape(tag)}>", text, re.IGNORECASE)]
    closers = [m for m in re.finditer(f"</{re.escape(tag)}>", text, re.IGNORECASE)]
    found: list[str] = []
    next_opener, last_start = 0, None
    floor = 0  # text before this offset belongs to an earlier span
    for closer in closers:
        while next_opener < len(openers) and openers[next_opener] <= closer.start():
            if openers[next_opener] - len(tag) - 2 >= floor:
                last_start = openers[next_opener]
            next_opener += 1
        if last_start is not None:
            found.append(text[last_start : closer.start()])
            last_start, floor = None, closer.end()
    return found
