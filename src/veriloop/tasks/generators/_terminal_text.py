"""The ``text-stats`` theme of ``terminal-repos``: words, sentences and counts over plain text."""

from __future__ import annotations

import random

from veriloop.tasks.generators._terminal_themes import Bug, Misuse, Module, Theme, Unit, ValueUnit

_WORDS = (
    "sun",
    "tree",
    "river",
    "stone",
    "garden",
    "lantern",
    "harbour",
    "mountain",
    "meadow",
    "cloud",
    "window",
    "bridge",
    "candle",
    "forest",
    "ocean",
    "pebble",
    "owl",
    "fox",
)
_COUNTS = ((4, 3, 2, 1, 1), (5, 3, 2, 1), (3, 2, 1, 1, 1, 1), (4, 2, 1, 1), (6, 4, 3, 2))


def _text_draw(rng: random.Random) -> dict[str, object]:
    """A three-sentence text over a few words with known counts, and what the tests expect of it."""
    counts = dict(zip(rng.sample(_WORDS, 6), rng.choice(_COUNTS)))
    bag = [word for word, times in counts.items() for _ in range(times)]
    rng.shuffle(bag)
    first, second = sorted(rng.sample(range(1, len(bag)), 2))
    pieces = [bag[:first], bag[first:second], bag[second:]]
    text = " ".join(" ".join(piece).capitalize() + rng.choice(".!?") for piece in pieces)
    ranked = sorted(counts, key=lambda word: (-counts[word], word))
    long_length = rng.choice(sorted({len(word) for word in bag}))
    long = [word for word in bag if len(word) >= long_length]
    opening, width = " ".join(pieces[0]).capitalize(), rng.randint(8, 14)
    return {
        "text": text,
        "top": ranked[0],
        "top_count": counts[ranked[0]],
        "top_two": ranked[:2],
        "top_three": ranked[:3],
        "word_total": len(bag),
        "mean_length": round(sum(map(len, bag)) / len(bag), 2),
        "per_sentence": round(len(bag) / 3, 1),
        "long_length": long_length,
        "long_share": round(len(long) / len(bag), 3),
        "distinct": round(100 * len(counts) / len(bag), 1),
        "width": width,
        "preview_text": opening if len(opening) <= width else opening[: width - 3] + "...",
    }


TEXT_STATS = Theme(
    name="text-stats",
    packages=("textstats", "wordcount", "prose", "lexis"),
    doc="Statistics over plain English text: words, sentences, frequencies and readability.",
    modules=(
        Module("tokens", ("tokens", "lexer", "splitting"), "Splitting text into words and sentences."),
        Module("counting", ("counting", "counts", "frequency"), "Word frequencies and percentages."),
        Module("measures", ("measures", "readability", "scores"), "Readability measures of a text."),
        Module("report", ("report", "digest", "overview"), "One-line descriptions of a text."),
    ),
    names={
        "words": ("words", "tokenize", "split_words"),
        "sentences": ("sentences", "split_sentences", "sentence_list"),
        "shorten": ("shorten", "truncate", "clip"),
        "word_counts": ("word_counts", "frequencies", "count_words"),
        "top_words": ("top_words", "most_common", "frequent_words"),
        "percent": ("percent", "percentage", "as_percent"),
        "average_word_length": ("average_word_length", "mean_word_length", "word_length"),
        "words_per_sentence": ("words_per_sentence", "sentence_length", "mean_sentence_words"),
        "long_word_share": ("long_word_share", "long_fraction", "share_of_long_words"),
        "distinct_line": ("distinct_line", "variety", "vocabulary_line"),
        "preview": ("preview", "teaser", "opening"),
    },
    draw=_text_draw,
    units=(
        Unit("word_pattern", ("tokens",), """WORD = re.compile(r"[a-z']+")""", imports=("re",)),
        Unit(
            "words",
            ("tokens",),
            '''
def $words(text):
    """The words of ``text``, lower-cased: runs of letters and apostrophes."""
    return WORD.findall(text.lower())
''',
            tests="""
def test_words_are_lower_case_runs_of_letters():
    assert $words("Don't STOP, now!") == ["don't", "stop", "now"]
    assert $words("  ... ") == []
    assert len($words("$text")) == $word_total
""",
        ),
        Unit(
            "sentences",
            ("tokens",),
            '''
def $sentences(text):
    """The sentences of ``text``: the stripped pieces between '.', '!' and '?' marks (a last piece
    without a mark counts too); empty pieces are dropped."""
    return [piece.strip() for piece in re.split(r"[.!?]", text) if piece.strip()]
''',
            tests="""
def test_sentences_end_at_marks():
    assert $sentences("One. Two!  Three? four") == ["One", "Two", "Three", "four"]
    assert $sentences("...") == []
""",
            imports=("re",),
        ),
        Unit(
            "shorten",
            ("tokens",),
            '''
def $shorten(text, width):
    """``text`` cut to at most ``width`` characters; a cut text ends in '...' (within the width)."""
    if len(text) <= width:
        return text
    return text[: width - 3] + "..."
''',
            tests="""
def test_shortening_keeps_within_the_width():
    assert $shorten("abcdefgh", 8) == "abcdefgh"
    assert $shorten("abcdefghijklmnopqrstuvwxyz", $width) == "abcdefghijklmnopqrstuvwxyz"[: $width - 3] + "..."
    assert len($shorten("x" * 40, $width)) == $width
""",
            visible="""
def test_short_and_long_texts():
    assert $shorten("abcdef", 6) == "abcdef"
    assert $shorten("abcdefghij", 6) == "abc..."
""",
            bugs=(
                Bug("if len(text) <= width:", "if len(text) < width:", "off-by-one"),
                Bug("text[: width - 3]", "text[: width - 2]", "off-by-one"),
            ),
        ),
        Unit(
            "word_counts",
            ("counting",),
            '''
def $word_counts(text):
    """``{word: how often it occurs}`` over the words of ``text``."""
    counts = {}
    for word in $words(text):
        counts[word] = counts.get(word, 0) + 1
    return counts
''',
            tests="""
def test_counts_of_each_word():
    assert $word_counts("a b a. A!") == {"a": 3, "b": 1}
    assert $word_counts("") == {}
""",
            visible="""
def test_most_frequent_word_count():
    assert $word_counts("$text")["$top"] == $top_count
""",
            bugs=(Bug("counts.get(word, 0) + 1", "counts.get(word, 1) + 1", "off-by-one"),),
        ),
        Unit(
            "top_words",
            ("counting",),
            '''
def $top_words(text, count):
    """The ``count`` most frequent words of ``text``, most frequent first; words as frequent as
    each other in alphabetical order."""
    counts = $word_counts(text)
    return sorted(counts, key=lambda word: (-counts[word], word))[:count]
''',
            tests="""
def test_ties_are_alphabetical():
    assert $top_words("b a c b a", 3) == ["a", "b", "c"]
    assert $top_words("$text", 3) == $top_three
""",
            visible="""
def test_two_most_frequent():
    assert $top_words("$text", 2) == $top_two
""",
            bugs=(
                Bug("(-counts[word], word)", "(counts[word], word)", "wrong comparison"),
                Bug(")[:count]", ")[: count - 1]", "off-by-one"),
            ),
        ),
        Unit(
            "percent",
            ("counting",),
            '''
def $percent(part, whole):
    """``part`` as a percentage of ``whole`` (0-100, not 0-1), rounded to one decimal; 0.0 when
    ``whole`` is 0."""
    return round(100 * part / whole, 1) if whole else 0.0
''',
            tests="""
def test_percentages_run_from_0_to_100():
    assert $percent(1, 8) == 12.5
    assert $percent(3, 3) == 100.0
    assert $percent(5, 0) == 0.0
""",
            returns=ValueUnit("%", "$percent(1, 4)", "25.0"),
        ),
        Unit(
            "average_word_length",
            ("measures",),
            '''
def $average_word_length(text):
    """The mean number of characters per word of ``text``, rounded to two decimals; 0.0 without words."""
    found = $words(text)
    if not found:
        return 0.0
    return round(sum(len(word) for word in found) / len(found), 2)
''',
            tests="""
def test_mean_word_length():
    assert $average_word_length("ab abcd") == 3.0
    assert $average_word_length("?!") == 0.0
""",
            visible="""
def test_average_length_of_the_words():
    assert $average_word_length("$text") == $mean_length
""",
            bugs=(Bug("/ len(found), 2)", "/ (len(found) + 1), 2)", "off-by-one"),),
        ),
        Unit(
            "words_per_sentence",
            ("measures",),
            '''
def $words_per_sentence(text):
    """The mean number of words per sentence, rounded to one decimal; 0.0 without sentences."""
    pieces = $sentences(text)
    if not pieces:
        return 0.0
    return round(len($words(text)) / len(pieces), 1)
''',
            tests="""
def test_words_per_sentence():
    assert $words_per_sentence("One two. Three four five six!") == 3.0
    assert $words_per_sentence("") == 0.0
""",
            visible="""
def test_sentence_length():
    assert $words_per_sentence("$text") == $per_sentence
""",
            bugs=(Bug("len($words(text)) / len(pieces)", "len(pieces) / len($words(text))", "swapped arguments"),),
        ),
        Unit(
            "long_word_share",
            ("measures",),
            '''
def $long_word_share(text, length):
    """The fraction (0-1) of the words of ``text`` that have ``length`` characters or more."""
    found = $words(text)
    long = [word for word in found if len(word) >= length]
    return $percent(len(long), len(found)) / 100
''',
            tests="""
def test_share_of_long_words():
    assert $long_word_share("aaaa bb cccc d", 4) == pytest.approx(0.5)
    assert $long_word_share("", 3) == 0.0
""",
            visible="""
def test_long_words_as_a_fraction():
    assert $long_word_share("$text", $long_length) == pytest.approx($long_share)
""",
            bugs=(Bug("len(word) >= length", "len(word) > length", "off-by-one"),),
        ),
        Unit(
            "distinct_line",
            ("report",),
            '''
def $distinct_line(text):
    """'W words, P% distinct' with P the percentage of different words, one decimal."""
    found = $words(text)
    return f"{len(found)} words, {$percent(len(set(found)), len(found))}% distinct"
''',
            tests="""
def test_distinct_words_line():
    assert $distinct_line("$text") == "$word_total words, $distinct% distinct"
    assert $distinct_line("to be or not to be") == "6 words, 66.7% distinct"
""",
        ),
        Unit(
            "preview",
            ("report",),
            '''
def $preview(text, width):
    """The first sentence of ``text`` shortened to ``width`` characters; '' when there is none."""
    pieces = $sentences(text)
    return $shorten(pieces[0], width) if pieces else ""
''',
            tests="""
def test_previews():
    assert $preview("Hello there. Bye.", 40) == "Hello there"
    assert $preview("", 10) == ""
""",
            visible="""
def test_preview_of_the_first_sentence():
    assert $preview("$text", $width) == "$preview_text"
""",
        ),
    ),
    misuses=(
        Misuse(
            caller="long_word_share",
            helper="percent",
            wrong=("$percent(len(long), len(found)) / 100", "$percent(len(long), len(found))"),
            decoy=("round(100 * part / whole, 1)", "round(part / whole, 3)"),
            contract="percentages run from 0 to 100; the caller takes one for a fraction",
        ),
        Misuse(
            caller="preview",
            helper="shorten",
            wrong=("$shorten(pieces[0], width)", "$shorten(width, pieces[0])"),
            decoy=("def $shorten(text, width):", "def $shorten(width, text):"),
            contract="the text comes first, then the width; the caller swaps them",
        ),
    ),
)
