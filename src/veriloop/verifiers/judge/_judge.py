"""The ``judge`` verifier kind: a reward no program can compute (style, helpfulness, "did the
agent do what was asked"), given by a judge model against a rubric.

``score`` mode asks the judge about each answer alone: one score on the config's scale, or one
per criterion weighted into one, normalised to [0, 1]. ``rank`` mode (as in RULER) shows the
judge a task's answers side by side, up to ``rank_group_size`` at a time, and asks for scores
relative to each other. The batch check sees groups: ``verify_many`` keeps a task's answers to
a judge in one batch (``veriloop verify``, ``veriloop audit``), while a path that
verifies one answer at a time (an episode, a check inside ``all_of``) ranks it alone, and its
detail says so.

Every request is built by ``_prompt.judge_prompt`` and read by ``_verdict.read_verdict``. A
request that brings no reply, or a reply without the verdict lines, is tried again with a fresh
prompt (new keys) up to ``retries`` times; after that the score is an infra error, never 0.
The prompt that counted and the judge's raw reply are kept in the score's ``detail``, so they
travel with the trajectory.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from veriloop.core import Task
from veriloop.verifiers._batch import register_batch_check
from veriloop.verifiers._registry import GraderError, Verdict, register_task_check, register_verifier
from veriloop.verifiers.judge._backends import (
    JudgeRequest,
    JudgeUnavailable,
    backend_for,
    backend_identity,
)
from veriloop.verifiers.judge._config import JudgeConfig
from veriloop.verifiers.judge._prompt import JudgePrompt, judge_prompt
from veriloop.verifiers.judge._verdict import MalformedVerdict, read_verdict

BACKOFF_S = 0.25  # the wait before a second attempt after a failed request, doubled each round


@dataclass
class _Job:
    """One request's worth of answers: one (score) or a task's group (rank)."""

    config: JudgeConfig
    task: Task
    items: list[int]  # positions in the batch
    answers: list[str]
    ranked: bool
    failures: list[str] = field(default_factory=list)
    waiting: bool = False  # the last attempt brought no reply: back off before the next
    prompt: JudgePrompt | None = None
    reply: str = ""
    scores: tuple[float, ...] | None = None
    final: Exception | None = None

    @property
    def done(self) -> bool:
        return self.scores is not None or self.final is not None

    def next_request(self) -> JudgeRequest:
        """The next attempt's request, on a fresh prompt (new keys)."""
        self.prompt = judge_prompt(self.config, self.task, self.answers, ranked=self.ranked)
        return JudgeRequest(self.prompt.messages, self.config.temperature, self.config.max_tokens)


def answer_text(config: JudgeConfig, answer: str) -> str:
    """What is judged of a response: its text, or with ``episode`` every model turn in order."""
    turns = getattr(answer, "turns", ())
    if not (config.episode and turns):
        return str(answer)
    return "\n\n".join(f"[turn {number}]\n{turn}" for number, turn in enumerate(turns, 1))


def _jobs(items: Sequence[tuple[JudgeConfig, Task, str]]) -> list[_Job]:
    """Score-mode items one job each; rank-mode items grouped by task, in chunks."""
    jobs: list[_Job] = []
    groups: dict[tuple[str, str], list[int]] = {}
    for index, (config, task, answer) in enumerate(items):
        if config.mode == "score":
            jobs.append(_Job(config, task, [index], [answer_text(config, answer)], ranked=False))
        else:
            groups.setdefault((task.id, config.model_dump_json()), []).append(index)
    for indices in groups.values():
        config, task, _ = items[indices[0]]
        size = config.rank_group_size
        for start in range(0, len(indices), size):
            chunk = indices[start : start + size]
            answers = [answer_text(config, items[i][2]) for i in chunk]
            jobs.append(_Job(config, task, chunk, answers, ranked=True))
    return jobs


def _settle(job: _Job, reply: str | JudgeUnavailable) -> None:
    """Record one attempt's outcome: scores, a failure to retry, or the final failure."""
    job.waiting = isinstance(reply, JudgeUnavailable)
    if isinstance(reply, JudgeUnavailable):
        job.reply = f"(no reply: {reply})"
        job.failures.append(f"attempt {len(job.failures) + 1}: judge unavailable: {reply}")
        if not reply.retry:
            job.final = reply
    else:
        job.reply = reply
        keys = job.prompt.keys if job.prompt is not None else ()
        try:
            job.scores = read_verdict(reply, keys, job.config.scale_min, job.config.scale_max)
            return
        except MalformedVerdict as exc:
            job.failures.append(f"attempt {len(job.failures) + 1}: verdict out of format: {exc}")
    if job.final is None and len(job.failures) > job.config.retries:
        job.final = GraderError(f"no verdict after {len(job.failures)} attempt(s)")


def _ask(jobs: list[_Job]) -> None:
    """One attempt for each job: fresh prompts, one batch per backend."""
    by_backend: dict[tuple[Any, ...], list[_Job]] = {}
    for job in jobs:
        by_backend.setdefault(backend_identity(job.config), []).append(job)
    for group in by_backend.values():
        requests = [job.next_request() for job in group]
        try:
            replies = backend_for(group[0].config).complete(requests)
        except JudgeUnavailable as exc:
            replies = [exc] * len(group)
        for job, reply in zip(group, replies):
            _settle(job, reply)


def _run_jobs(jobs: list[_Job]) -> None:
    """Ask until every job has its scores or has used its attempts."""
    rounds = 0
    while pending := [job for job in jobs if not job.done]:
        if any(job.waiting for job in pending):
            time.sleep(BACKOFF_S * 2 ** (rounds - 1))
        _ask(pending)
        rounds += 1


def _detail(job: _Job, summary: str) -> str:
    lines = [summary, *job.failures]
    if job.prompt is not None:
        lines += ["--- judge prompt ---", job.prompt.text(), "--- judge reply ---", job.reply]
    return "\n".join(lines)


def _verdict(job: _Job, scores: tuple[float, ...], position: int) -> Verdict:
    """The Verdict of the job's ``position``-th answer, from the judge's ``scores``."""
    config, answer = job.config, job.answers[position]
    span = config.scale_max - config.scale_min
    if job.ranked:
        given = [scores[position]]
        weights = [1.0]
    else:
        given = list(scores)
        weights = [c.weight for c in config.criteria]
    reward = sum(w * (s - config.scale_min) / span for w, s in zip(weights, given)) / sum(weights)
    shown = ", ".join(f"{s:g}" for s in given)
    summary = f"judge: {shown} on {config.scale_min}..{config.scale_max}"
    if job.ranked:
        alone = len(job.answers) == 1
        summary += " (ranked alone: no group in this path)" if alone else f" (ranked among {len(job.answers)})"
    length = len(answer)
    if config.length_norm_chars is not None and length > config.length_norm_chars:
        reward *= config.length_norm_chars / length
        summary += f"; length-normalised x{config.length_norm_chars / length:.3f} ({length} characters)"
    summary += f" -> reward {reward:.3f}"
    passed = reward >= config.pass_threshold
    feedback = (
        "" if passed else f"A judge scored this answer {shown} on a scale of {config.scale_min} to {config.scale_max}."
    )
    return Verdict(reward, passed, detail=_detail(job, summary), feedback=feedback)


def judge_many(items: Sequence[tuple[JudgeConfig, Task, str]]) -> list[Verdict | Exception]:
    """One Verdict, or the grader's failure, per ``(config, task, answer)`` item, in order."""
    jobs = _jobs(items)
    _run_jobs(jobs)
    outcomes: list[Verdict | Exception] = [GraderError("not judged")] * len(items)
    for job in jobs:
        for position, index in enumerate(job.items):
            if job.scores is None:
                failure = job.final or GraderError("no verdict")
                outcomes[index] = GraderError(_detail(job, f"judge gave no verdict: {failure}"))
            else:
                outcomes[index] = _verdict(job, job.scores, position)
    return outcomes


@register_verifier("judge", JudgeConfig)
def check_judge(config: JudgeConfig, task: Task, response: str) -> Verdict:
    """A judge model's score of the response against the rubric, normalised to [0, 1]."""
    outcome = judge_many([(config, task, response)])[0]
    if isinstance(outcome, Exception):
        raise outcome
    return outcome


register_batch_check("judge", whole_groups=True)(judge_many)


@register_task_check("judge")
def judge_task_problem(config: JudgeConfig, task: Task) -> str | None:
    """What stops the judge before it is asked: a model directory that is not there (relative to
    the working directory), an API key variable that is not set."""
    if config.model is not None and not os.path.isdir(os.path.expanduser(config.model)):
        return f"the judge model {config.model!r} is not a directory"
    if config.api_key_env is not None and not os.environ.get(config.api_key_env):
        return f"the environment variable {config.api_key_env} (api_key_env) is not set"
    return None
