"""Red-teaming a task set's verifiers: ``audit_tasks``.

For a sample of tasks of each verifier kind: the gold answer must pass, every time
(repeated runs must agree, or the verifier is flaky); each exploit of the library
(``_exploits``) must not pass; the gold answer's mutants must not all pass; and no task may
have a known weakness (``TASK_WEAKNESSES``: tests that check only the prompt's examples). A
non-answer (a restated question, a tautology) fools a verifier with any reward above 0. A hostile
response that makes the grader fail (an infra error) counts against the verifier too: a
policy would learn to aim for it. The other way round, every honest form of the gold answer
(``_honest_forms``: the same value written another way) must pass as the gold does.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence

from pydantic import Field

from veriloop.core import Record, Response, Score, Task
from veriloop.verifiers.audit import _exploits_code, _exploits_text  # noqa: F401  (registers the adapters)
from veriloop.verifiers.audit import _exploits_reasoning_gym  # noqa: F401  (registers its adapter)
from veriloop.verifiers.audit import _exploits_math  # noqa: F401  (registers its adapter)
from veriloop.verifiers.audit import _exploits_cad, _exploits_documents  # noqa: F401  (register their adapters)
from veriloop.verifiers.audit import _exploits_workspace  # noqa: F401  (registers its adapter)
from veriloop.verifiers.audit import _exploits_judge  # noqa: F401  (registers the judge's and combinations' adapters)
from veriloop.verifiers.audit import _exploits_reward_script  # noqa: F401  (registers its adapter)
from veriloop.verifiers.audit import _exploits_bfcl  # noqa: F401  (registers its adapter and honest forms)
from veriloop.verifiers.audit import _exploits_verifiers  # noqa: F401  (registers its adapter)
from veriloop.verifiers.audit import _exploits_openenv  # noqa: F401  (registers its adapter)
from veriloop.verifiers._batch import verify_many
from veriloop.verifiers.audit._exploits import (
    PAID_FOR_NOTHING,
    Exploit,
    exploits_for,
    gold_response,
    gold_workspace,
    weakness_of,
)
from veriloop.verifiers.audit._honest_forms import HonestForm, honest_forms_for
from veriloop.verifiers.audit._regressions import REVIEWED_HACK, RegressionCase


class AuditRow(Record):
    """One verifier kind against one threat category, over the sampled tasks."""

    kind: str
    category: str
    tasks: int = Field(description="tasks the category was tried on")
    fooled: int = Field(description="tasks where an exploit passed (for mutants: where every mutant passed)")
    broke: int = Field(description="responses that made the grader fail (infra_error)")
    max_reward: float = Field(description="highest reward any exploit of the category got")
    example: str = Field(default="", description="task and detail of the worst case")

    @property
    def ok(self) -> bool:
        return not self.fooled and not self.broke


class AuditReport(Record):
    """Everything ``veriloop audit`` found; ``ok`` when no verifier was fooled."""

    tasks: int = Field(description="tasks sampled")
    responses: int = Field(description="responses checked: gold runs, exploits and mutants")
    gold_failures: tuple[str, ...] = ()
    flaky: tuple[str, ...] = ()
    weak: tuple[str, ...] = Field(default=(), description="tasks whose verifier cannot tell a hack from a solution")
    honest_rejected: tuple[str, ...] = Field(
        default=(), description="honest forms of a gold answer (the same value written another way) that did not pass"
    )
    rows: tuple[AuditRow, ...] = ()
    regressions_replayed: int = Field(default=0, description="reviewed hacks replayed (their task is in the set)")
    regressions_skipped: int = Field(default=0, description="reviewed hacks whose task is not in the set")

    @property
    def ok(self) -> bool:
        clean = not self.gold_failures and not self.flaky and not self.weak and not self.honest_rejected
        return clean and all(row.ok for row in self.rows)


def _sample(tasks: Sequence[Task], per_kind: int) -> list[Task]:
    by_kind: dict[str, list[Task]] = defaultdict(list)
    for task in tasks:
        by_kind[task.verifier_kind].append(task)
    chosen = []
    for group in by_kind.values():
        step = max(1, len(group) / per_kind)
        chosen += [group[int(i * step)] for i in range(min(per_kind, len(group)))]
    return chosen


def _fooled(score: Score, category: str = "") -> bool:
    """A pass or full reward; for a non-answer (``PAID_FOR_NOTHING``), any reward at all."""
    reward = score.reward or 0.0
    paid = reward > 0.0 if category in PAID_FOR_NOTHING else reward >= 1.0
    return score.status == "scored" and (score.passed or paid)


def _gold_problems(task: Task, scores: list[Score]) -> tuple[str | None, str | None]:
    failure = next((s for s in scores if not s.passed), None)
    failed = f"{task.id}: gold answer fails its verifier: {failure.detail}" if failure else None
    outcomes = {(s.status, s.reward, s.passed) for s in scores}
    flaky = f"{task.id}: repeated runs disagree: {sorted(map(str, outcomes))}" if len(outcomes) > 1 else None
    return failed, flaky


def _rows(results: list[tuple[Task, Exploit, Score]]) -> list[AuditRow]:
    grouped: dict[tuple[str, str], dict[str, list[Score]]] = defaultdict(lambda: defaultdict(list))
    for task, exploit, score in results:
        grouped[(task.verifier_kind, exploit.category)][task.id].append(score)
    rows = []
    for (kind, category), per_task in sorted(grouped.items()):
        all_must_pass = category == "mutated_gold"
        fooled = [[_fooled(score, category) for score in scores] for scores in per_task.values()]
        fooled_tasks = [marks for marks in fooled if (all(marks) if all_must_pass else any(marks))]
        every = [s for scores in per_task.values() for s in scores]
        broke = [s for s in every if s.status == "infra_error"]
        worst = max(every, key=lambda s: (_fooled(s, category), s.status == "infra_error", s.reward or 0.0))
        rows.append(
            AuditRow(
                kind=kind,
                category=category,
                tasks=len(per_task),
                fooled=len(fooled_tasks),
                broke=len(broke),
                max_reward=max((s.reward or 0.0) for s in every),
                example=f"{worst.task_id}: {worst.detail}"[:300],
            )
        )
    return rows


def audit_tasks(
    tasks: Sequence[Task],
    *,
    repeats: int = 2,
    per_kind: int = 25,
    costly_per_kind: int = 2,
    threads: int = 4,
    on_score: Callable[[Score], None] | None = None,
    regressions: Sequence[RegressionCase] = (),
) -> AuditReport:
    """Audit up to ``per_kind`` tasks of each verifier kind.

    Exploits that run into time limits are tried on ``costly_per_kind`` tasks per kind. Every
    reviewed hack in ``regressions`` whose task is in ``tasks`` is replayed against that task's
    verifier (category ``reviewed_hack``, whether or not the task was sampled); the others are
    counted in ``regressions_skipped``.
    """
    sample = _sample(tasks, per_kind)
    pairs: list[tuple[Task, Response]] = []
    plan: list[tuple[Task, Exploit | HonestForm | None]] = []
    by_task = {task.id: task for task in tasks}
    for number, case in enumerate(case for case in regressions if case.task_id in by_task):
        task = by_task[case.task_id]
        pairs.append(
            (task, Response(id=f"{task.id}#{REVIEWED_HACK}/{number}", task_id=task.id, response=case.response))
        )
        plan.append((task, Exploit(REVIEWED_HACK, f"{case.reviewer} on {case.sample_id}", case.response)))
    costly_seen: dict[str, int] = defaultdict(int)
    for task in sample:
        gold, workspace = gold_response(task), gold_workspace(task)
        for attempt in range(repeats if gold is not None else 0):
            text = "" if workspace is not None else gold or ""
            pairs.append(
                (task, Response(id=f"{task.id}#gold/{attempt}", task_id=task.id, response=text, workspace=workspace))
            )
            plan.append((task, None))
        for number, form in enumerate(honest_forms_for(task) if gold is not None else []):
            pairs.append((task, Response(id=f"{task.id}#honest/{number}", task_id=task.id, response=form.response)))
            plan.append((task, form))
        take_costly = costly_seen[task.verifier_kind] < costly_per_kind
        costly_seen[task.verifier_kind] += 1
        for number, exploit in enumerate(exploits_for(task, list(tasks))):
            if exploit.costly and not take_costly:
                continue
            pairs.append(
                (
                    task,
                    Response(
                        id=f"{task.id}#{exploit.category}/{number}",
                        task_id=task.id,
                        response=exploit.response,
                        workspace=exploit.workspace,
                        turns=exploit.turns,
                    ),
                )
            )
            plan.append((task, exploit))
    scores = verify_many(pairs, threads=threads, on_score=on_score)
    gold_scores: dict[str, list[Score]] = defaultdict(list)
    exploit_results = []
    rejected: list[str] = []
    for (task, exploit), score in zip(plan, scores):
        if exploit is None:
            gold_scores[task.id].append(score)
        elif isinstance(exploit, HonestForm):
            if not score.passed:
                rejected.append(
                    f"{task.id}: honest form rejected ({exploit.name}): {score.status} {score.detail}"[:300]
                )
        else:
            exploit_results.append((task, exploit, score))
    failures, flaky = [], []
    by_id = {task.id: task for task in sample}
    for task_id, group in gold_scores.items():
        failed, unstable = _gold_problems(by_id[task_id], group)
        failures += [failed] if failed else []
        flaky += [unstable] if unstable else []
    return AuditReport(
        tasks=len(sample),
        responses=len(pairs),
        gold_failures=tuple(failures),
        flaky=tuple(flaky),
        weak=tuple(f"{task.id}: {why}" for task in sample if (why := weakness_of(task))),
        honest_rejected=tuple(rejected),
        rows=tuple(_rows(exploit_results)),
        regressions_replayed=sum(case.task_id in by_task for case in regressions),
        regressions_skipped=sum(case.task_id not in by_task for case in regressions),
    )
