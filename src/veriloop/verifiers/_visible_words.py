"""Counting the words and tokens of a response as a reader and a tokenizer would see them.

``str.split()`` counts whitespace-separated runs, which a response dodges for free: words joined
by zero-width characters ("one\\u200btwo"), by characters that render as blanks but are not
whitespace (U+3164 Hangul filler, U+2800 braille blank), or by punctuation ("one,two,three"),
and whole paragraphs of Chinese or Japanese, each count as one word. Both counts first
replace every character that renders as nothing (format controls such as zero-width spaces and
joiners, variation selectors, tag characters, control characters) or as a blank by a space: a
hidden character between two words must not join them into one. Then:

``visible_words``: runs of letters or digits (with inner apostrophes, hyphens and decimal points),
whatever separates them; each CJK, kana or Hangul character is a word. ``visible_tokens``: as
BPE pre-tokenizers (GPT-2, cl100k, Llama 3) split text, each run of letters, each group of up to
three digits, each run of other symbols, and each CJK, kana or Hangul character. In both, a run
longer than ``CHARS_PER_PIECE`` counts once per that many characters, since no tokenizer's
vocabulary holds such a run as one token.

Token counts are an estimate close to what such tokenizers count on prose, exact for none of them.
"""

from __future__ import annotations

import math
import re
import unicodedata

CHARS_PER_PIECE = 16
# Characters that render as a blank gap without being whitespace to ``str.isspace``.
_BLANKS = "\u115f\u1160\u2800\u3164\uffa0\u180e"
_TOKEN = re.compile(r"[^\W\d_]+|\d{1,3}|[^\w\s]+|_+")
_WORD = re.compile(r"\d+(?:[.,]\d+)*|[^\W_]+(?:['\u2019-][^\W_]+)*")
_ONE_PER_CHARACTER = re.compile(
    r"[\u2e80-\u2fdf\u3040-\u30ff\u3100-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0003134f]"
)


def _invisible(char: str) -> bool:
    category = unicodedata.category(char)
    if category == "Cf":  # zero-width space and joiners, word joiner, BOM, soft hyphen, bidi and tag controls
        return True
    if category == "Mn" and ("\ufe00" <= char <= "\ufe0f" or "\U000e0100" <= char <= "\U000e01ef"):
        return True  # variation selectors
    return category == "Cc" and not char.isspace()


def visible_text(text: str) -> str:
    """``text`` with each character that renders as nothing or as a blank replaced by a space."""
    if text.isascii() and text.isprintable():
        return text
    return "".join(" " if char in _BLANKS or _invisible(char) else char for char in text)


def _count(pieces: list[str]) -> int:
    count = 0
    for piece in pieces:
        wide = len(_ONE_PER_CHARACTER.findall(piece))
        rest = len(piece) - wide
        count += wide + math.ceil(rest / CHARS_PER_PIECE)
    return count


def visible_words(text: str) -> int:
    """How many words ``text`` holds once invisible characters are removed (see the module docstring)."""
    return _count(_WORD.findall(visible_text(text)))


def visible_tokens(text: str) -> int:
    """About how many tokens a BPE tokenizer would count (see the module docstring)."""
    return _count(_TOKEN.findall(visible_text(text)))
