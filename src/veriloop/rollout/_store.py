"""The trajectory store: an append-only directory of Parquet parts, and the episodes' scenes.

Each ``append`` writes one new part file atomically (temporary name, fsync, rename), so a run
killed mid-write loses at most the batch it was writing and never corrupts earlier parts;
leftover temporary files are ignored by readers. ``table()`` returns everything as one Arrow
table for ad-hoc queries; ``query`` covers the common filters.

An episode that had a workspace leaves a *scene*: its final workspace, kept in a ``SceneStore``
(``scenes/`` beside the parts) under the sha256 of its archive, so equal final workspaces are
kept once; the trajectory names it in ``scene``. ``veriloop replay`` restores a scene and runs
the verifier on it again; ``veriloop verify --rescore`` judges every stored episode again, its
passes included (a verifier fixed after a hack must see the workspaces that fooled it).
"""

from __future__ import annotations

import hashlib
import os
import re
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from veriloop.core import Snapshot, Trajectory, UserError, read_parquet_rows, write_parquet

_PART = re.compile(r"^part-(\d{8})-[0-9a-f]{8}\.parquet$")


_SCENE = re.compile(r"^[0-9a-f]{64}$")


class SceneStore:
    """Final workspaces by the sha256 of their archive: ``ROOT/<sha256>.tar``."""

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root)

    def put(self, snapshot: Snapshot) -> str:
        digest = hashlib.sha256(snapshot.archive).hexdigest()
        path = self.root / f"{digest}.tar"
        if not path.is_file():
            from veriloop.core import atomic_write

            self.root.mkdir(parents=True, exist_ok=True)
            with atomic_write(path, "wb") as handle:
                handle.write(snapshot.archive)
        return digest

    def get(self, digest: str) -> Snapshot:
        path = self.root / f"{digest}.tar"
        if not _SCENE.match(digest) or not path.is_file():
            raise UserError(f"scene {digest[:12]} is not in {self.root}")
        return Snapshot(archive=path.read_bytes())


def keep_scenes(trajectories: Iterable[Trajectory], scenes: SceneStore) -> list[Trajectory]:
    """``trajectories``, each one with a final workspace naming its kept scene."""
    kept = []
    for trajectory in trajectories:
        if trajectory.final_workspace is not None and trajectory.scene is None:
            trajectory = trajectory.model_copy(update={"scene": scenes.put(trajectory.final_workspace)})
        kept.append(trajectory)
    return kept


class TrajectoryStore:
    """Append-only, crash-safe storage of trajectories under one directory."""

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root)
        if self.root.exists() and not self.root.is_dir():
            raise UserError(f"{self.root}: exists and is not a directory")

    @property
    def scenes(self) -> SceneStore:
        return SceneStore(self.root / "scenes")

    def parts(self) -> list[Path]:
        if not self.root.is_dir():
            return []
        return sorted(p for p in self.root.iterdir() if _PART.match(p.name))

    def append(self, trajectories: Iterable[Trajectory]) -> Path | None:
        """Write one batch as a new part; returns its path (None for an empty batch)."""
        batch = list(trajectories)
        if not batch:
            return None
        self.root.mkdir(parents=True, exist_ok=True)
        batch = keep_scenes(batch, self.scenes)
        parts = self.parts()
        number = int(_PART.match(parts[-1].name).group(1)) + 1 if parts else 0
        path = self.root / f"part-{number:08d}-{uuid.uuid4().hex[:8]}.parquet"
        write_parquet(path, batch)
        return path

    def keep_parts(self, count: int) -> None:
        """Delete every part after the first ``count`` (a resumed run drops what its rolled-back steps stored)."""
        for part in self.parts()[count:]:
            part.unlink()

    def __iter__(self) -> Iterator[Trajectory]:
        for part in self.parts():
            for row in read_parquet_rows(part):
                yield Trajectory.model_validate(row)

    def __len__(self) -> int:
        import pyarrow.parquet as pq

        return sum(pq.read_metadata(part).num_rows for part in self.parts())

    def table(self) -> Any:
        """All parts as one pyarrow Table (nested columns stay JSON text)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        tables = [pq.read_table(part) for part in self.parts()]
        return pa.concat_tables(tables, promote_options="default") if tables else pa.table({})

    def query(
        self,
        *,
        task_id: str | None = None,
        domain: str | None = None,
        passed: bool | None = None,
        min_reward: float | None = None,
        policy_version: int | None = None,
        stop_reason: str | None = None,
    ) -> list[Trajectory]:
        """Trajectories matching every given filter, in the order they were stored."""
        out = []
        for trajectory in self:
            passed_now = trajectory.score is not None and trajectory.score.passed
            if task_id is not None and trajectory.task_id != task_id:
                continue
            if domain is not None and trajectory.domain != domain:
                continue
            if passed is not None and passed_now != passed:
                continue
            if min_reward is not None and (trajectory.reward is None or trajectory.reward < min_reward):
                continue
            if policy_version is not None and trajectory.policy_version != policy_version:
                continue
            if stop_reason is not None and trajectory.stop_reason != stop_reason:
                continue
            out.append(trajectory)
        return out


def conversation(trajectory: Trajectory) -> list[dict[str, str]]:
    """The episode as chat messages: its prompt, then assistant turns and tool observations."""
    messages = [m.model_dump() for m in trajectory.prompt]
    for turn in trajectory.turns:
        messages.append({"role": "assistant" if turn.role == "assistant" else "tool", "content": turn.text})
    return messages


def sft_rows(trajectories: Iterable[Trajectory]) -> Iterator[dict[str, Any]]:
    """Chat-format SFT rows (``{"messages": [...]}``) from the trajectories that passed."""
    for trajectory in trajectories:
        if trajectory.score is not None and trajectory.score.passed and trajectory.turns:
            yield {"messages": conversation(trajectory), "task_id": trajectory.task_id, "domain": trajectory.domain}


def preference_pairs(trajectories: Iterable[Trajectory]) -> Iterator[dict[str, Any]]:
    """One (chosen, rejected) pair per task that has both a passing and a failing answer."""
    passing: dict[str, Trajectory] = {}
    failing: dict[str, Trajectory] = {}
    for trajectory in trajectories:
        if trajectory.score is None or trajectory.score.status != "scored" or not trajectory.turns:
            continue
        bucket = passing if trajectory.score.passed else failing
        bucket.setdefault(trajectory.task_id, trajectory)
    for task_id, chosen in passing.items():
        rejected = failing.get(task_id)
        if rejected is None:
            continue
        yield {
            "task_id": task_id,
            "domain": chosen.domain,
            "prompt": [m.model_dump() for m in chosen.prompt],
            "chosen": conversation(chosen)[len(chosen.prompt) :],
            "rejected": conversation(rejected)[len(rejected.prompt) :],
        }
