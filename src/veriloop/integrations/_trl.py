"""A reward function for TRL's trainers (GRPOTrainer ``reward_funcs``), built from a task set.

TRL calls ``reward_func(prompts=..., completions=..., completion_ids=..., **columns)`` where
``columns`` holds every other dataset column as a list aligned with the completions. The
dataset needs a column naming each row's task (``task_id`` by default). Completions are text,
or chat messages whose last message is the answer. The result is one float per completion;
a grader failure gives ``None`` (TRL's "no reward from this function") unless
``infra_error_reward`` sets a number.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from veriloop.core import Response, Score, Task, UserError
from veriloop.integrations._task_index import index_tasks


def completion_text(completion: Any) -> str:
    """The answer text of one TRL completion: a string, or a list of chat messages."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion and isinstance(completion[-1], Mapping):
        return str(completion[-1].get("content", ""))
    if isinstance(completion, Mapping):
        return str(completion.get("content", ""))
    raise TypeError(f"cannot read a completion of type {type(completion).__name__}")


class TaskReward:
    """Callable with TRL's reward-function signature; scores completions with veriloop verifiers.

    ``workers`` threads verify one batch concurrently (math and code checks run in their own
    processes, so threads are enough). ``last_scores`` keeps the full Score rows of the latest
    call, for logging detail and feedback.
    """

    def __init__(
        self,
        tasks: str | os.PathLike[str] | Iterable[Task] | Mapping[str, Task],
        task_id_column: str = "task_id",
        workers: int = 4,
        infra_error_reward: float | None = None,
        name: str = "veriloop",
    ):
        self.tasks = index_tasks(tasks)
        self.task_id_column = task_id_column
        self.infra_error_reward = infra_error_reward
        self.__name__ = name  # TRL names each reward function's logged metrics after __name__
        self._workers = max(1, workers)
        self._pool: ThreadPoolExecutor | None = None
        self.last_scores: list[Score] = []

    def _verify(self, item: tuple[int, str, Any]) -> Score:
        from veriloop.verifiers import verify

        index, task_id, completion = item
        task = self.tasks.get(task_id)
        if task is None:
            raise UserError(f"task id {task_id!r} (row {index}) is not in the task set")
        return verify(task, Response(id=f"{task_id}#{index}", task_id=task_id, response=completion_text(completion)))

    def __call__(
        self, prompts: Sequence[Any] | None = None, completions: Sequence[Any] | None = None, **kwargs: Any
    ) -> list[float | None]:
        if completions is None:
            raise TypeError("reward function needs 'completions'")
        task_ids = kwargs.get(self.task_id_column)
        if task_ids is None:
            raise UserError(
                f"the dataset needs a {self.task_id_column!r} column naming each row's task "
                f"(columns passed: {', '.join(sorted(k for k in kwargs if k != 'trainer_state')) or 'none'})"
            )
        if len(task_ids) != len(completions):
            raise UserError(f"{len(task_ids)} task ids for {len(completions)} completions")
        items = [(i, str(task_id), c) for i, (task_id, c) in enumerate(zip(task_ids, completions))]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self._workers, thread_name_prefix="veriloop-reward")
        self.last_scores = list(self._pool.map(self._verify, items))
        return [self.infra_error_reward if s.reward is None else s.reward for s in self.last_scores]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


def trl_reward_function(
    tasks: str | os.PathLike[str] | Iterable[Task] | Mapping[str, Task],
    task_id_column: str = "task_id",
    workers: int = 4,
    infra_error_reward: float | None = None,
) -> TaskReward:
    """A TRL reward function for ``tasks`` (a task file or tasks): ``GRPOTrainer(reward_funcs=[...])``."""
    return TaskReward(tasks, task_id_column=task_id_column, workers=workers, infra_error_reward=infra_error_reward)


def trl_dataset_rows(tasks: Iterable[Task]) -> list[dict[str, Any]]:
    """Rows for a TRL dataset: ``prompt`` (chat messages) and ``task_id`` for each task."""
    return [{"prompt": task.messages(), "task_id": task.id} for task in tasks]
