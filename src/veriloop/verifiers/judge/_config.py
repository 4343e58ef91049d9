"""The fields of the ``judge`` kind: the rubric, the judge that applies it, how it scores, and
the bounds on what it reads and how long it may take."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from veriloop.verifiers._registry import VerifierConfig

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class JudgeCriterion(VerifierConfig):
    """One criterion of a rubric given as a list: scored on its own, weighted into the reward."""

    criterion: str = Field(min_length=1, description="what the answer must do, in words the judge reads")
    weight: float = Field(default=1.0, gt=0, description="weight of this criterion in the reward")


class JudgeConfig(VerifierConfig):
    rubric: str | list[JudgeCriterion] = Field(
        description="what a good answer does: one text, or a list of {criterion, weight} scored one by one"
    )
    model: str | None = Field(
        default=None, description="judge: a local model directory, served by a veriloop engine (hf)"
    )
    url: str | None = Field(
        default=None, description="judge: an OpenAI-compatible base URL (http(s)://HOST[:PORT]/v1) instead of model"
    )
    served_model: str | None = Field(default=None, description="with url: the model name the server knows")
    api_key_env: str | None = Field(
        default=None, description="with url: the environment variable holding the API key (never the key itself)"
    )
    mode: Literal["score", "rank"] = Field(
        default="score",
        description="score: each answer alone on the scale; rank: a task's answers side by side, scored relative "
        "to each other (where a group is verified together, as in veriloop verify; alone elsewhere)",
    )
    scale_min: int = Field(default=0, description="the lowest score the judge may give (reward 0)")
    scale_max: int = Field(default=10, description="the highest score the judge may give (reward 1)")
    pass_threshold: float = Field(default=0.7, gt=0, le=1, description="reward at which an answer counts as passed")
    episode: bool = Field(
        default=False, description="quote every model turn of an episode (tool calls included), not only the last"
    )
    show_gold: bool = Field(
        default=True, description="show the task's gold to the judge as a reference answer (never to the policy)"
    )
    max_answer_chars: int = Field(
        default=6000, ge=200, description="longer answers are cut in the middle, the cut marked, before judging"
    )
    length_norm_chars: int | None = Field(
        default=None,
        ge=1,
        description="when set, the reward of an answer longer than this many characters is scaled by this / its length",
    )
    rubric_echo_words: int = Field(
        default=6,
        ge=0,
        description="runs of this many words copied from the rubric are struck from the answer (0: off)",
    )
    rank_group_size: int = Field(default=8, ge=2, le=32, description="rank: answers judged together at most")
    temperature: float = Field(default=0.0, ge=0, description="the judge's sampling temperature")
    max_tokens: int = Field(default=512, ge=16, description="tokens the judge may write, reasons and verdict together")
    timeout_s: float = Field(default=60.0, gt=0, le=600, description="with url: seconds one request may take")
    retries: int = Field(
        default=2, ge=0, le=10, description="more attempts after a failed request or a verdict out of format"
    )

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str | None) -> str | None:
        if url is not None and not url.startswith(("http://", "https://")):
            raise ValueError("url must start with http:// or https:// (the server's OpenAI-compatible base, .../v1)")
        return url.rstrip("/") if url is not None else None

    @field_validator("api_key_env")
    @classmethod
    def _names_a_variable(cls, name: str | None) -> str | None:
        if name is not None and not _ENV_NAME.match(name):
            raise ValueError("api_key_env names an environment variable (such as OPENAI_API_KEY), never the key itself")
        return name

    @field_validator("rubric")
    @classmethod
    def _rubric_says_something(cls, rubric: Any) -> Any:
        if isinstance(rubric, str) and not rubric.strip():
            raise ValueError("the rubric is empty")
        if isinstance(rubric, list) and not rubric:
            raise ValueError("the rubric lists no criteria")
        return rubric

    @model_validator(mode="after")
    def _one_judge(self) -> JudgeConfig:
        if (self.model is None) == (self.url is None):
            raise ValueError("give the judge as exactly one of 'model' (a local directory) or 'url'")
        if self.url is not None and not self.served_model:
            raise ValueError("a url judge needs 'served_model', the model name its server knows")
        if self.model is not None and (self.served_model or self.api_key_env):
            raise ValueError("'served_model' and 'api_key_env' go with 'url', not with a local 'model'")
        if self.scale_max <= self.scale_min:
            raise ValueError("scale_max must be above scale_min")
        if 0 < self.rubric_echo_words < 3:
            raise ValueError("rubric_echo_words is 0 (off) or at least 3: shorter runs strike ordinary words")
        return self

    @property
    def criteria(self) -> list[JudgeCriterion]:
        """The rubric as criteria: a text rubric is one criterion of weight 1."""
        if isinstance(self.rubric, str):
            return [JudgeCriterion(criterion=self.rubric)]
        return list(self.rubric)

    @property
    def backend(self) -> str:
        """The name of the judge backend that serves this judge (``JUDGE_BACKENDS``)."""
        return "model" if self.model is not None else "url"


def judge_specs(verifier: Any) -> list[dict[str, Any]]:
    """The ``judge`` objects in a task's ``verifier`` object, those inside ``all_of`` and
    ``weighted`` checks included (unvalidated: a caller that needs them valid validates the task)."""
    if not isinstance(verifier, dict):
        return []
    found = [verifier] if verifier.get("kind") == "judge" else []
    checks = verifier.get("checks")
    for check in checks if isinstance(checks, list) else []:
        found += judge_specs(check.get("verifier") if isinstance(check, dict) else None)
    return found


def ranks_groups(task: Any) -> bool:
    """Whether ``task``'s verifier is a judge that ranks a task's answers side by side (``rank``
    mode): its rewards are only right for a whole group judged together (``verify_many``). A
    judge inside ``all_of`` or ``weighted`` is checked one answer at a time and ranks it alone."""
    verifier = getattr(task, "verifier", None)
    return isinstance(verifier, dict) and verifier.get("kind") == "judge" and verifier.get("mode") == "rank"
