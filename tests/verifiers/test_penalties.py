"""Penalty kinds: what they count and what cannot dodge them."""

from __future__ import annotations

import pytest

from veriloop.core import Response, Task
from veriloop.verifiers import verify
from veriloop.verifiers._visible_words import visible_tokens, visible_words

EXACT = {"kind": "exact", "extract": "last_line"}


def score(penalty, response, gold="42"):
    verifier = {"kind": "all_of", "checks": [{"verifier": EXACT}], "penalties": [penalty]}
    task = Task(id="t", domain="d", prompt="p", verifier=verifier, gold=gold)
    return verify(task, Response(id="r", task_id="t", response=response))


TWENTY_WORDS = " ".join(f"word{i}" for i in range(20))


@pytest.mark.parametrize(
    "joiner",
    ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u3164", "\u2800", "\u115f", "\x00", ",", "/"],
)
def test_words_joined_by_invisible_or_punctuation_characters_still_count(joiner):
    padded = TWENTY_WORDS.replace(" ", joiner)
    assert visible_words(padded) == 20
    result = score({"kind": "too_long", "max_words": 10}, padded + "\n42")
    assert not result.passed and "21 words" in result.feedback


def test_scripts_without_spaces_count_one_word_per_character():
    assert visible_words("这是一个很长的中文回答") == 11
    assert not score({"kind": "too_long", "max_words": 5}, "这是一个很长的中文回答\n42").passed


def test_one_endless_run_counts_as_many_words_and_tokens():
    assert visible_words("a" * 1600) == 100 and visible_tokens("a" * 1600) == 100


def test_honest_text_is_counted_as_a_reader_counts_it():
    text = "The answer is 3.14, so-called pi; it's the ratio of two lengths."
    assert visible_words(text) == len(text.split()) == 12
    assert score({"kind": "too_long", "max_words": 13}, text + "\n42").passed


def test_max_tokens_counts_punctuation_and_digit_groups():
    assert visible_tokens("Hello, world!") == 4
    assert visible_tokens("1234567") == 3
    assert visible_tokens("a\u200b.\u200bb") == 3
    assert not score({"kind": "too_long", "max_tokens": 5}, "one.two.three\n42").passed
    assert score({"kind": "too_long", "max_tokens": 5}, "It is\n42").passed


def test_too_long_needs_a_limit():
    result = score({"kind": "too_long"}, "42")
    assert result.status == "infra_error" and "set max_chars, max_words or max_tokens" in result.detail
