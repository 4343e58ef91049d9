"""A task's verifier config is validated once per process: the task file's check and every
later verification of the task share the frozen result, and invalid fields are refused every time."""

from __future__ import annotations

import pytest
from pydantic import ValidationError, field_validator

from veriloop.verifiers import Verdict, VerifierConfig, VerifierKind

validated: list[str] = []


class Counting(VerifierConfig):
    word: str
    weights: list[float] = []

    @field_validator("word")
    @classmethod
    def _no_spaces(cls, word: str) -> str:
        validated.append(word)
        if " " in word:
            raise ValueError("one word only")
        return word


KIND = VerifierKind(name="counting_test_kind", config=Counting, check=lambda config, task, text: Verdict(1.0, True))


@pytest.fixture(autouse=True)
def fresh_count():
    validated.clear()


def test_equal_fields_are_validated_once_and_share_one_frozen_config():
    first = KIND.parse_config({"kind": "counting_test_kind", "word": "alpha", "weights": [1.0, 2.5]})
    again = KIND.parse_config({"weights": [1.0, 2.5], "word": "alpha", "kind": "counting_test_kind"})
    assert again is first and validated == ["alpha"]
    with pytest.raises(ValidationError):
        first.word = "beta"  # frozen: sharing it cannot let one check change another's config


def test_different_fields_get_their_own_config():
    alpha = KIND.parse_config({"word": "alpha2"})
    beta = KIND.parse_config({"word": "beta2"})
    weighted = KIND.parse_config({"word": "alpha2", "weights": [3.0]})
    assert (alpha.word, beta.word, weighted.weights) == ("alpha2", "beta2", [3.0])
    assert alpha.weights == [] and validated == ["alpha2", "beta2", "alpha2"]


def test_invalid_fields_are_refused_every_time():
    for _ in range(2):
        with pytest.raises(ValidationError, match="one word only"):
            KIND.parse_config({"word": "two words"})
    assert validated == ["two words", "two words"]


def test_fields_that_are_not_json_data_are_still_validated():
    config = KIND.parse_config({"word": "gamma", "weights": (1.0,)})
    assert config.weights == [1.0]
    with pytest.raises(ValidationError):
        KIND.parse_config({"word": "gamma", "weights": {1.0: object()}})
