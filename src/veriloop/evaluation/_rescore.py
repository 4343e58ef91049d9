"""Re-scoring without re-sampling: the current verifiers over a run's stored responses.

A run directory keeps every response it scored: an eval run in ``samples.parquet`` (with each
workspace episode's final workspace in ``scenes/``), a training run in ``trajectories/`` (scenes
in ``trajectories/scenes/``). ``rescore_run`` judges each of them again with the verifiers of
the task files as they are now (the run's own, as it recorded them: ``eval.json``'s
``task_files``, ``train_config.json``'s ``data.train`` and schedule; or ``tasks`` when given),
and reports what changed: per task, per domain and overall, the responses and passes before and
after and the mean reward over scored responses; and every response whose verdict flipped
(passed or status changed). The run directory is only read.

A response is not judged again (and counted apart, by reason) when its generation failed (there
was nothing to judge) or when its task has a workspace and the run kept no final workspace for
it (runs that kept failures' workspaces only). ``write_rescore`` writes ``scores.jsonl`` (one
Score per judged response, keeping its id) and ``rescore.json`` (the report).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from veriloop.core import Record, Response, Score, Task, UserError, inline_form, judgeable_response

if TYPE_CHECKING:
    from veriloop.rollout import SceneStore

SCORES_FILE = "scores.jsonl"
REPORT_FILE = "rescore.json"
GENERATION_FAILED = "generation failed: nothing to judge"
NO_WORKSPACE = "its final workspace was not kept"
_SHOWN_MISSING = 5


class RescoreTally(Record):
    """Verdicts over a set of responses; the mean reward is over the scored ones."""

    responses: int = 0
    scored: int = 0
    passed: int = 0
    infra_errors: int = 0
    mean_reward: float | None = Field(default=None, description="over scored responses (None when none is)")


class RescoreChange(Record):
    """The same responses judged by the run's verifiers (``before``) and by the current ones (``after``)."""

    before: RescoreTally
    after: RescoreTally


class RescoreTaskChange(RescoreChange):
    domain: str


class RescoreOutcome(Record):
    """One verdict: reward, passed, status."""

    reward: float | None
    passed: bool
    status: Literal["scored", "infra_error"]


class RescoreFlip(Record):
    """A response whose verdict changed: passed, or status (scored / infra_error)."""

    id: str
    task_id: str
    domain: str
    before: RescoreOutcome
    after: RescoreOutcome
    feedback: str = Field(default="", description="the current verifier's feedback")
    detail: str = Field(default="", description="the current verifier's detail")


class RescoreReport(Record):
    """What re-scoring a run changed (``rescore.json``)."""

    run: str
    run_kind: Literal["eval", "training"]
    task_files: tuple[str, ...]
    task_set_hash: dict[str, str | None] = Field(description="'run': as the run recorded it (evals), 'now'")
    responses: int = Field(description="responses the run stored")
    rescored: int
    not_rescored: dict[str, int] = Field(default_factory=dict, description="reason -> responses")
    reward_changed: int = Field(description="judged responses whose reward changed")
    overall: RescoreChange
    domains: dict[str, RescoreChange]
    tasks: dict[str, RescoreTaskChange]
    flips: tuple[RescoreFlip, ...]
    created_at: str


@dataclass(frozen=True)
class StoredResponse:
    """One response as its run stored it."""

    id: str
    task_id: str
    domain: str
    response: str
    turns: tuple[str, ...]
    scene: str  # sha256 of its kept final workspace, "" when none
    before: RescoreOutcome
    generation_failed: bool


def stored_responses(run: Path) -> tuple[Literal["eval", "training"], list[StoredResponse], list[str], SceneStore]:
    """``(kind, responses, the run's own task files, scene store)`` of an eval or training run."""
    from veriloop.evaluation._run import SCENES_DIR
    from veriloop.evaluation._samples import SAMPLES_FILE, read_samples, run_task_files
    from veriloop.evaluation._scenes import training_task_files
    from veriloop.rollout import SceneStore, TrajectoryStore

    if not run.is_dir():
        raise UserError(f"{run}: no such run directory")
    if (run / SAMPLES_FILE).is_file():
        stored = [_from_sample(sample) for sample in read_samples(run / SAMPLES_FILE)]
        return "eval", stored, run_task_files(run), SceneStore(run / SCENES_DIR)
    if (run / "trajectories").is_dir():
        store = TrajectoryStore(run / "trajectories")
        stored = [_from_trajectory(trajectory) for trajectory in store]
        if not stored:
            raise UserError(f"{run}: its trajectories/ holds none (was run.save_trajectories off?)")
        return "training", stored, training_task_files(run), store.scenes
    if (run / "parts").is_dir():
        raise UserError(f"{run}: an eval that has not finished (no samples.parquet); resume it with 'veriloop eval'")
    raise UserError(f"{run}: not an eval run (samples.parquet) or a training run (trajectories/)")


def _from_sample(sample) -> StoredResponse:
    return StoredResponse(
        id=sample.trajectory_id or f"{sample.task_id}#{sample.sample_index}",
        task_id=sample.task_id,
        domain=sample.domain,
        response=sample.response,
        turns=tuple(sample.turn_texts),
        scene=sample.scene,
        before=RescoreOutcome(reward=sample.reward, passed=sample.passed, status=sample.status),
        generation_failed=sample.stop_reason == "error",
    )


def _from_trajectory(trajectory) -> StoredResponse:
    score = trajectory.score
    before = (
        RescoreOutcome(reward=score.reward, passed=score.passed, status=score.status)
        if score is not None
        else RescoreOutcome(reward=None, passed=False, status="infra_error")
    )
    return StoredResponse(
        id=trajectory.id,
        task_id=trajectory.task_id,
        domain=trajectory.domain,
        response=trajectory.response,
        turns=tuple(turn.text for turn in trajectory.turns if turn.role == "assistant"),
        scene=trajectory.scene or "",
        before=before,
        generation_failed=trajectory.stop_reason == "error",
    )


def run_tasks(
    run: Path, recorded: Sequence[str], given: Sequence[str], stored: list[StoredResponse]
) -> dict[str, Task]:
    """The tasks of every stored response, from ``given`` files or the run's ``recorded`` ones."""
    from veriloop.evaluation._run import load_task_inputs

    files = list(given) or list(recorded)
    if not files:
        raise UserError(f"{run}: records no task files to find its tasks in; give --tasks FILE")
    if not given and (gone := [f for f in files if not Path(f).is_file()]):
        raise UserError(
            f"{run}: its task file {gone[0]} (as the run recorded it, relative to where it ran) is not there; "
            "give --tasks FILE"
        )
    tasks = {task.id: task for task in load_task_inputs(files)[0]}
    missing = sorted({response.task_id for response in stored} - set(tasks))
    if missing:
        shown = ", ".join(missing[:_SHOWN_MISSING]) + (", ..." if len(missing) > _SHOWN_MISSING else "")
        raise UserError(f"{len(missing)} tasks of {run} are in none of {', '.join(files)} ({shown}); give --tasks FILE")
    return tasks


def rescore_run(
    run: str | os.PathLike[str],
    tasks: Sequence[str | os.PathLike[str]] = (),
    *,
    threads: int = 4,
    on_score: Callable[[Score], None] | None = None,
) -> tuple[RescoreReport, list[Score]]:
    """Judge every stored response of ``run`` again with the current verifiers (see the module's
    docstring); returns the report and the new scores (ids as stored)."""
    from veriloop.evaluation._summary import task_set_hash
    from veriloop.verifiers import verify_many

    root = Path(run)
    kind, stored, recorded, scenes = stored_responses(root)
    by_id = run_tasks(root, recorded, [str(t) for t in tasks], stored)
    judged, skipped = _requests(stored, by_id, scenes)
    to_verify = [(by_id[s.task_id], request) for s, request in judged if not isinstance(request, Score)]
    verified = iter(verify_many(to_verify, threads=threads, on_score=on_score))
    scores = [request if isinstance(request, Score) else next(verified) for _, request in judged]
    pairs = [(s, score) for (s, _), score in zip(judged, scores, strict=True)]
    report = RescoreReport(
        run=str(root),
        run_kind=kind,
        task_files=tuple(str(t) for t in tasks) or tuple(recorded),
        task_set_hash={
            "run": _recorded_hash(root) if kind == "eval" else None,
            "now": task_set_hash(list(by_id.values())),
        },
        responses=len(stored),
        rescored=len(pairs),
        not_rescored=skipped,
        reward_changed=sum(s.before.reward != score.reward for s, score in pairs),
        overall=_change(pairs),
        domains={domain: _change(mine) for domain, mine in _grouped(pairs, "domain").items()},
        tasks={
            task_id: RescoreTaskChange(domain=mine[0][0].domain, **dict(_change(mine)))
            for task_id, mine in _grouped(pairs, "task_id").items()
        },
        flips=tuple(_flip(s, score) for s, score in pairs if _flipped(s.before, score)),
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    return report, scores


def _requests(
    stored: list[StoredResponse], tasks: dict[str, Task], scenes: SceneStore
) -> tuple[list[tuple[StoredResponse, Response | Score]], dict[str, int]]:
    """``[(stored, Response or the Score of a workspace that cannot be judged)]`` and the skipped, by reason."""
    judged, skipped = [], {}
    for response in stored:
        task = tasks[response.task_id]
        if response.generation_failed:
            skipped[GENERATION_FAILED] = skipped.get(GENERATION_FAILED, 0) + 1
            continue
        if task.workspace is not None and not response.scene:
            skipped[NO_WORKSPACE] = skipped.get(NO_WORKSPACE, 0) + 1
            continue
        row = {"id": response.id, "task_id": response.task_id, "response": response.response, "turns": response.turns}
        if response.scene:
            row["workspace"] = inline_form(scenes.get(response.scene).files())
        judged.append((response, judgeable_response(row)))
    return judged, dict(sorted(skipped.items()))


def _recorded_hash(run: Path) -> str | None:
    """The task set hash an eval run recorded in ``eval.json`` (None when unreadable)."""
    import json

    from veriloop.evaluation._samples import SETTINGS_FILE

    try:
        return json.loads((run / SETTINGS_FILE).read_text(encoding="utf-8")).get("task_set_hash")
    except (OSError, ValueError, AttributeError):
        return None


def _tally(outcomes: list[RescoreOutcome]) -> RescoreTally:
    scored = [o for o in outcomes if o.status == "scored"]
    rewards = [o.reward for o in scored if o.reward is not None]
    return RescoreTally(
        responses=len(outcomes),
        scored=len(scored),
        passed=sum(o.passed for o in scored),
        infra_errors=len(outcomes) - len(scored),
        mean_reward=sum(rewards) / len(rewards) if rewards else None,
    )


def _outcome(score: Score) -> RescoreOutcome:
    return RescoreOutcome(reward=score.reward, passed=score.passed, status=score.status)


def _change(pairs: list[tuple[StoredResponse, Score]]) -> RescoreChange:
    return RescoreChange(
        before=_tally([s.before for s, _ in pairs]), after=_tally([_outcome(score) for _, score in pairs])
    )


def _grouped(pairs: list[tuple[StoredResponse, Score]], key: str) -> dict[str, list[tuple[StoredResponse, Score]]]:
    """``pairs`` by their stored response's ``key`` (``domain`` or ``task_id``), keys sorted."""
    groups: dict[str, list[tuple[StoredResponse, Score]]] = {}
    for pair in pairs:
        groups.setdefault(getattr(pair[0], key), []).append(pair)
    return dict(sorted(groups.items()))


def _flipped(before: RescoreOutcome, score: Score) -> bool:
    return before.passed != score.passed or before.status != score.status


def _flip(stored: StoredResponse, score: Score) -> RescoreFlip:
    return RescoreFlip(
        id=stored.id,
        task_id=stored.task_id,
        domain=stored.domain,
        before=stored.before,
        after=_outcome(score),
        feedback=score.feedback,
        detail=score.detail,
    )


def rescore_destination(out: str | os.PathLike[str], run: str | os.PathLike[str]) -> Path:
    """``out`` as the folder re-scoring writes to; UserError when it is the run directory, lies
    inside it (the run is never written to) or is a file."""
    folder, root = Path(out).resolve(), Path(run).resolve()
    if folder == root or root in folder.parents:
        raise UserError(f"--out {out}: inside the run directory {run}, which re-scoring leaves untouched")
    if folder.exists() and not folder.is_dir():
        raise UserError(f"--out {out}: exists and is not a directory")
    return folder


def write_rescore(out: str | os.PathLike[str], report: RescoreReport, scores: list[Score]) -> tuple[Path, Path]:
    """Write ``scores.jsonl`` and ``rescore.json`` in ``out``, each atomically (see ``rescore_destination``)."""
    from veriloop.core import atomic_write, write_jsonl

    folder = rescore_destination(out, report.run)
    folder.mkdir(parents=True, exist_ok=True)
    write_jsonl(folder / SCORES_FILE, scores)
    with atomic_write(folder / REPORT_FILE) as handle:
        handle.write(report.model_dump_json(indent=2) + "\n")
    return folder / SCORES_FILE, folder / REPORT_FILE
