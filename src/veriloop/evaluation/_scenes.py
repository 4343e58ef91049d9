"""Scenes that replay: find an episode's kept final workspace and judge it again.

An eval run keeps the final workspace of each episode on a workspace in ``OUT/scenes/`` and
names it in the sample's ``scene``; a training run keeps them in ``OUT/trajectories/scenes/``
with its trajectories. ``find_scene`` looks the episode up by its trajectory id in either kind of run
directory, with its task (from the run's own task files, or ``tasks`` when given);
``replay_scene`` runs the task's verifier on the restored workspace, as the episode's end did.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from veriloop.core import Response, Score, Snapshot, Task, UserError, inline_form


@dataclass(frozen=True)
class Scene:
    """An episode on a workspace as its run recorded it."""

    trajectory_id: str
    task: Task
    response: str
    reward: float | None
    passed: bool
    detail: str
    snapshot: Snapshot
    environment: str  # hash recorded with the episode ("" when it ran on no environment)
    turns: tuple[str, ...] = ()  # the text of each model turn, as the episode's verifier received them


def find_scene(run: str | os.PathLike[str], trajectory_id: str, tasks: Sequence[str] = ()) -> Scene:
    """The scene of ``trajectory_id`` in the eval or training run directory ``run``."""
    from veriloop.rollout import SceneStore, TrajectoryStore

    root = Path(run)
    if (root / "samples.parquet").is_file():
        from veriloop.evaluation._run import SCENES_DIR
        from veriloop.evaluation._samples import read_samples, run_task_files

        found = [s for s in read_samples(root / "samples.parquet") if s.trajectory_id == trajectory_id]
        if not found:
            raise UserError(f"{root}: no sample has trajectory id {trajectory_id!r}")
        sample = found[0]
        files = tasks or run_task_files(root)
        record = (sample.task_id, sample.response, sample.reward, sample.passed, sample.detail, sample.scene)
        scenes, environment, turns = SceneStore(root / SCENES_DIR), sample.environment, sample.turn_texts
    elif (root / "trajectories").is_dir():
        store = TrajectoryStore(root / "trajectories")
        match = next((t for t in store if t.id == trajectory_id), None)
        if match is None:
            raise UserError(f"{root}: no trajectory has id {trajectory_id!r}")
        score = match.score
        detail = score.detail if score else ""
        record = (match.task_id, match.response, match.reward, bool(score and score.passed), detail, match.scene or "")
        files = tasks or training_task_files(root)
        scenes, environment = store.scenes, match.environment or ""
        turns = tuple(turn.text for turn in match.turns if turn.role == "assistant")
    else:
        raise UserError(f"{root}: not an eval run (samples.parquet) or a training run (trajectories/)")
    task_id, response, reward, passed, detail, scene = record
    if not scene:
        raise UserError(
            f"trajectory {trajectory_id} kept no scene: its episode had no workspace, or its run kept failures only"
        )
    task = _task(files, task_id)
    return Scene(trajectory_id, task, response, reward, passed, detail, scenes.get(scene), environment, turns)


def replay_scene(scene: Scene) -> Score:
    """The verifier's score of the scene's final workspace and answer, judged again now."""
    from veriloop.verifiers import verify

    workspace = inline_form(scene.snapshot.files())
    return verify(
        scene.task,
        Response(
            id=scene.trajectory_id,
            task_id=scene.task.id,
            response=scene.response,
            workspace=workspace,
            turns=scene.turns,
        ),
    )


def training_task_files(root: Path) -> list[str]:
    """The task files a training run's ``train_config.json`` names (``data.train`` and the
    schedule's mixture), as given to the run; [] without that file."""
    path = root / "train_config.json"
    if not path.is_file():
        return []
    config = json.loads(path.read_text(encoding="utf-8"))
    files = [config.get("data", {}).get("train", "")]
    files += [d.get("tasks", "") for d in config.get("schedule", {}).get("mixture", []) or [] if isinstance(d, dict)]
    return [f for f in files if f]


def _task(files: Sequence[str], task_id: str) -> Task:
    from veriloop.tasks import load_tasks

    for file in files:
        for task in load_tasks(file):
            if task.id == task_id:
                return task
    raise UserError(f"task {task_id!r} is in none of {', '.join(map(str, files)) or 'no task files'}; give --tasks")
