"""``run_eval``: sample every task K times, score the samples, write rows and a summary.

The task list is cut into fixed chunks; each finished chunk is written atomically as
``OUT/parts/part-NNNNN.parquet``. A killed eval started again with the same settings skips
the chunks already written, and because every sample's seed depends only on the run seed,
the task's position and the sample index, the resumed run gives the same rows as one that
was never interrupted. When every chunk is done the parts become ``samples.parquet`` and
``summary.json``, and the run is recorded in the run registry.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, UTC
from pathlib import Path
from typing import Any

from pydantic import Field

from veriloop.core import Record, Task, Trajectory, UserError, atomic_write, write_parquet, write_records
from veriloop.evaluation._failures import export_failures as write_failures
from veriloop.evaluation._overlap import DEFAULT_NGRAM, OverlapReport, overlap
from veriloop.evaluation._run_registry import RunRegistry, default_registry_path
from veriloop.evaluation._samples import SAMPLES_FILE, SETTINGS_FILE, SUMMARY_FILE, EvalSample, read_samples
from veriloop.evaluation._summary import summarize, task_set_hash
from veriloop.tasks import load_tasks, question_text

PARTS_DIR = "parts"
SCENES_DIR = "scenes"  # final workspaces of the episodes, by sha256 (veriloop replay, verify --rescore)
SEED_STRIDE = 7919  # the rollout's per-task seed stride: chunk seeds continue the global sequence
BENCHMARK_TASKS = "benchmark-tasks.jsonl"  # a benchmark's tasks as run, for report, review and replay

TaskInput = str | os.PathLike[str] | Sequence[Task | str | os.PathLike[str]]


class EvalSettings(Record):
    """What an eval directory was started with; a resume must match it (paths of task files aside)."""

    model: str = Field(description="model directory or openai:MODEL@URL (or the engine's label)")
    engine: str
    task_set_hash: str
    task_files: tuple[str, ...] = ()
    tasks: int
    samples_per_task: int = Field(ge=1)
    seed: int
    chunk_size: int = Field(ge=1)
    episode: dict[str, Any]
    environments: dict[str, str] = Field(default_factory=dict, description="name -> hash of each task environment")
    benchmark: dict[str, Any] | None = Field(
        default=None, description="the shelf benchmark the tasks come from: name, source, package version, limit"
    )


def environment_hashes(tasks: Sequence[Task]) -> dict[str, str]:
    """The hash of each environment the tasks name (a missing one is a UserError naming its build)."""
    from veriloop.sandbox import environment_hashes as hashes

    return hashes(task.environment for task in tasks if task.environment)


def check_environments(settings: EvalSettings, trajectories: Sequence[Trajectory]) -> None:
    """A UserError when an episode ran on another build of an environment than the eval began with."""
    known = set(settings.environments.values())
    for trajectory in trajectories:
        if trajectory.environment and trajectory.environment not in known:
            raise UserError(
                f"task {trajectory.task_id} ran on environment build {trajectory.environment[:12]}, not the one this "
                f"eval began with ({', '.join(f'{n} {h[:12]}' for n, h in settings.environments.items())}): "
                "was it rebuilt during the run? Start the eval again in a new --out"
            )


def load_task_inputs(tasks: TaskInput) -> tuple[list[Task], list[str]]:
    """Tasks from files and/or Task objects; an id repeated across files is a UserError."""
    items = [tasks] if isinstance(tasks, (str, os.PathLike)) else list(tasks)
    loaded: list[Task] = []
    files: list[str] = []
    origin: dict[str, str] = {}
    for item in items:
        source = "the given tasks" if isinstance(item, Task) else str(item)
        batch = [item] if isinstance(item, Task) else load_tasks(item)
        if not isinstance(item, Task):
            files.append(source)
        for task in batch:
            if task.id in origin:
                raise UserError(
                    f"{source}: task id {task.id!r} appears twice (also in {origin[task.id]}); ids must be unique across task files"
                )
            origin[task.id] = source
            loaded.append(task)
    if not loaded:
        raise UserError("no tasks to evaluate")
    return loaded, files


def resolve_model_dir(path: Path) -> Path:
    """A model directory itself, a training run's ``final/`` or a checkpoint's ``model/``."""
    for candidate in (path, path / "final", path / "model"):
        if (candidate / "config.json").is_file():
            return candidate
    raise UserError(
        f"{path}: not a model directory (no config.json here, in final/ or in model/); "
        "for a served model use openai:MODEL@http://HOST:PORT/v1"
    )


def open_engine(
    model: Any, *, device: str = "cpu", api_key_env: str = "OPENAI_API_KEY", dtype: str = "auto"
) -> tuple[Any, str, bool]:
    """``(engine, label, owned)`` for a model directory (loaded in ``dtype``: auto, float32 or
    bfloat16), an ``openai:MODEL@URL`` spec or an engine."""
    if not isinstance(model, (str, os.PathLike)):
        return model, getattr(model, "name", type(model).__name__), False
    spec = os.fspath(model)
    if spec.startswith("replay:"):
        from veriloop.rollout import ReplayEngine

        return ReplayEngine(spec.removeprefix("replay:")), spec, True
    if spec.startswith("openai:"):
        from veriloop.rollout import OpenAIEngine, parse_endpoint

        name, url = parse_endpoint(spec)
        return OpenAIEngine(name, url, api_key_env=api_key_env), spec, True
    directory = resolve_model_dir(Path(spec))
    from veriloop.rollout import create_engine

    return create_engine("hf", model=str(directory), device=device, dtype=dtype), spec, True


def eval_episode_config(
    temperature: float,
    max_tokens: int,
    tools: Sequence[str] = (),
    max_turns: int = 1,
    context_budget: int | None = None,
    context_policy: str = "stop",
    tool_instructions: bool = True,
    max_tokens_by_domain: Mapping[str, int] | None = None,
) -> Any:
    """The ``EpisodeConfig`` of an eval (single-turn unless ``tools`` and ``max_turns`` say
    otherwise; ``tool_instructions``: the tools' system message; ``max_tokens_by_domain``: the
    tokens per turn of the tasks of those domains, ``max_tokens`` for the others); out-of-range
    values are a UserError."""
    from pydantic import ValidationError

    from veriloop.core import describe_validation_error
    from veriloop.rollout import EpisodeConfig, StopConfig

    try:
        return EpisodeConfig(
            temperature=temperature,
            max_tokens_per_turn=max_tokens,
            max_tokens_by_domain=dict(max_tokens_by_domain or {}),
            tools=tuple(tools),
            tool_instructions=tool_instructions,
            stop=StopConfig(max_turns=max_turns),
            context_budget=context_budget,
            context_policy=context_policy,
        )
    except ValidationError as exc:
        raise UserError(f"eval settings: {describe_validation_error(exc)}") from None


def _with_defaults(episode: dict[str, Any]) -> dict[str, Any]:
    """A stored episode config with the settings added since it was written at their defaults, so
    an eval started by an earlier release resumes (a changed setting still differs)."""
    from pydantic import ValidationError

    from veriloop.rollout import EpisodeConfig

    try:
        return EpisodeConfig.model_validate(episode).model_dump(mode="json")
    except ValidationError:
        return episode  # not a config this release reads: it differs, and the resume is refused


def _claim(out: Path, settings: EvalSettings) -> None:
    """Write ``eval.json`` in a new directory, or check it matches in an existing one."""
    if out.exists() and not out.is_dir():
        raise UserError(f"{out}: exists and is not a directory")
    path = out / SETTINGS_FILE
    if path.is_file():
        try:
            previous = EvalSettings.model_validate_json(path.read_text(encoding="utf-8"))
        except ValueError:
            raise UserError(f"{path}: unreadable eval settings; delete {out} to start over") from None
        previous = previous.model_copy(update={"episode": _with_defaults(previous.episode)})
        changed = [
            k for k in EvalSettings.model_fields if k != "task_files" and getattr(previous, k) != getattr(settings, k)
        ]
        if changed:
            raise UserError(
                f"{out}: holds an eval with other settings ({', '.join(changed)} differ); "
                "use another --out, or delete it to start over"
            )
        return
    with atomic_write(path) as handle:
        handle.write(settings.model_dump_json(indent=2))


def _sample_row(task: Task, trajectory: Trajectory, chunk: int, wall_s: float) -> EvalSample:
    score = trajectory.score
    generation_failed = trajectory.stop_reason == "error"
    infra = generation_failed or score is None or score.status == "infra_error"
    detail = score.detail if score else "generation failed: the engine returned an error"
    assistant = [turn for turn in trajectory.turns if turn.role == "assistant"]
    return EvalSample(
        task_id=task.id,
        domain=task.domain,
        sample_index=trajectory.sample_index,
        prompt=question_text(task),
        response=trajectory.response,
        reward=None if infra else trajectory.reward,
        passed=bool(not infra and score.passed),
        status="infra_error" if infra else "scored",
        detail=detail,
        feedback="" if infra or score is None else score.feedback,
        images={} if score is None else score.images,
        stop_reason=trajectory.stop_reason,
        completion_tokens=sum(len(t.token_ids) or t.generated_tokens for t in assistant),
        turns=len(assistant),
        turn_texts=tuple(turn.text for turn in assistant),
        episode=_episode_turns(trajectory) if len(trajectory.turns) > 1 else (),
        generate_s=trajectory.timings.get("generate_s", 0.0),
        verify_s=trajectory.timings.get("verify_s", 0.0),
        chunk=chunk,
        chunk_wall_s=round(wall_s, 6),
        trajectory_id=trajectory.id,
        scene=trajectory.scene or "",
        environment=trajectory.environment or "",
        context_tokens_max=max(trajectory.context_tokens, default=0),
        context_tokens_sum=sum(trajectory.context_tokens),
        truncations=trajectory.truncations,
        drops=trajectory.drops,
    )


def _episode_turns(trajectory: Trajectory) -> tuple[dict[str, str], ...]:
    return tuple({"role": t.role, "text": t.text, "tool": t.tool or ""} for t in trajectory.turns)


def _run_chunks(
    tasks: list[Task],
    engine: Any,
    episode: Any,
    settings: EvalSettings,
    out: Path,
    concurrency: int,
    on_progress: Callable[[int, int], None] | None,
    tools: Any = None,
) -> list[EvalSample]:
    """Every chunk's rows, reading finished parts and rolling out the rest."""
    from veriloop.rollout import SceneStore, keep_scenes, rollout

    parts = out / PARTS_DIR
    parts.mkdir(parents=True, exist_ok=True)
    for leftover in parts.glob(".*.tmp"):  # a chunk being written when the run was killed
        leftover.unlink()
    rows: list[EvalSample] = []
    for chunk, start in enumerate(range(0, len(tasks), settings.chunk_size)):
        chunk_tasks = tasks[start : start + settings.chunk_size]
        part = parts / f"part-{chunk:05d}.parquet"
        if part.is_file():
            done = read_samples(part)
            if {s.task_id for s in done} != {t.id for t in chunk_tasks}:
                raise UserError(
                    f"{part}: holds other tasks than chunk {chunk} (was the task file reordered?); delete {out} to start over"
                )
        else:
            started = time.perf_counter()
            batch = rollout(
                chunk_tasks,
                engine,
                episode,
                group_size=settings.samples_per_task,
                concurrency=concurrency,
                seed=settings.seed + SEED_STRIDE * start,
                tools=tools,
            )
            wall_s = time.perf_counter() - started
            by_id = {task.id: task for task in chunk_tasks}
            check_environments(settings, batch.trajectories)
            trajectories = keep_scenes(batch.trajectories, SceneStore(out / SCENES_DIR))
            done = [_sample_row(by_id[t.task_id], t, chunk, wall_s) for t in trajectories]
            write_parquet(part, done)
        rows += done
        if on_progress is not None:
            on_progress(min(start + settings.chunk_size, len(tasks)), len(tasks))
    return rows


def run_eval(
    model: Any,
    tasks: TaskInput,
    *,
    samples: int = 1,
    out: str | os.PathLike[str],
    temperature: float = 1.0,
    max_tokens: int = 256,
    seed: int = 0,
    episode: Any = None,
    registry: str | os.PathLike[str] | None = None,
    record: bool = True,
    export_failures: str | os.PathLike[str] | None = None,
    train_tasks: TaskInput | None = None,
    ngram: int = DEFAULT_NGRAM,
    chunk_size: int = 16,
    concurrency: int = 64,
    device: str = "cpu",
    dtype: str = "auto",
    api_key_env: str = "OPENAI_API_KEY",
    model_label: str | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    on_warning: Callable[[str], None] | None = None,
    too_long: str = "skip",
    benchmark: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Evaluate ``model`` on ``tasks`` with ``samples`` samples per task; returns the summary.

    ``model``: a local HF model directory (a training run directory or a checkpoint also
    work), ``openai:MODEL@URL`` (key read from ``api_key_env``), or an engine object
    (``model_label`` names it in the summary and the registry; default: the engine's name).
    ``episode`` (an ``EpisodeConfig``) replaces ``temperature``/``max_tokens`` when given,
    e.g. to allow tools or several turns. Writes ``out/samples.parquet`` and
    ``out/summary.json`` (see ``summarize``; ``summary["pass@1"]`` is a float in [0, 1]),
    resumes a killed run in the same ``out``, and records the run in ``registry`` (default:
    ``evals.sqlite`` beside ``out``) unless ``record`` is False. ``train_tasks`` adds an
    overlap check (``summary["overlap"]``, and a warning). ``export_failures`` writes the
    failed tasks with verifier feedback as a task set. Tasks whose prompt leaves no room for
    ``max_tokens`` in the model's context are skipped and listed (``too_long="skip"``) or
    refused (``"error"``); text-level engines cannot count tokens and are not checked.
    ``benchmark``: the record of the shelf benchmark the tasks come from (``benchmark_tasks``),
    kept in the settings and the summary; its tasks are written to ``out/benchmark-tasks.jsonl``
    and listed as the run's task file.
    """
    if samples < 1:
        raise UserError(f"samples must be at least 1, got {samples}")
    if chunk_size < 1:
        raise UserError(f"chunk size must be at least 1, got {chunk_size}")
    task_list, files = load_task_inputs(tasks)
    out = Path(out)
    overlap_report = overlap(load_task_inputs(train_tasks)[0], task_list, ngram) if train_tasks is not None else None
    if overlap_report is not None and on_warning is not None and overlap_report.warning():
        on_warning(overlap_report.warning())
    if too_long not in ("skip", "error"):
        raise UserError(f"too_long must be 'skip' or 'error', got {too_long!r}")
    engine, label, owned = open_engine(model, device=device, api_key_env=api_key_env, dtype=dtype)
    label = model_label or label
    try:
        episode = episode or eval_episode_config(temperature, max_tokens)
        task_list, skipped = _fit_context(task_list, engine, episode, too_long, on_warning)
        if benchmark is not None and not files:
            files = [str(out / BENCHMARK_TASKS)]
        settings = EvalSettings(
            model=label,
            engine=engine.name,
            task_set_hash=task_set_hash(task_list),
            task_files=tuple(files),
            tasks=len(task_list),
            samples_per_task=samples,
            seed=seed,
            chunk_size=chunk_size,
            episode=episode.model_dump(mode="json"),
            environments=environment_hashes(task_list),
            benchmark=dict(benchmark) if benchmark is not None else None,
        )
        _claim(out, settings)
        if benchmark is not None and files == [str(out / BENCHMARK_TASKS)]:
            write_records(out / BENCHMARK_TASKS, task_list)
        if (out / SAMPLES_FILE).is_file() and (out / SUMMARY_FILE).is_file():
            rows = read_samples(out / SAMPLES_FILE)
            summary = json.loads((out / SUMMARY_FILE).read_text(encoding="utf-8"))
        else:
            tools = _episode_tools(episode)
            try:
                rows = _run_chunks(task_list, engine, episode, settings, out, concurrency, on_progress, tools)
            finally:
                if tools is not None:
                    tools.close()
            summary = _finish(out, settings, rows, overlap_report, skipped)
    finally:
        if owned:
            engine.close()
    if export_failures is not None:
        count = write_failures(export_failures, task_list, rows, label)
        summary["exported_failures"] = {"path": str(export_failures), "tasks": count}
    if record and summary["pass@1"] is None:  # nothing was measured: no point for the trend lines
        record = False
        if on_warning is not None:
            on_warning("no sample was scored, so the run is not recorded in the run registry")
    if record:
        summary["run_id"] = RunRegistry(registry or default_registry_path(out)).record(out, summary)
    if record or export_failures is not None:
        _write_json(out / SUMMARY_FILE, summary)
    return summary


def _episode_tools(episode: Any) -> Any:
    """Sandbox tools for episodes that may run code (on each task's environment), else None."""
    if not {"python", "shell"} & set(episode.tools):
        return None
    from veriloop.rollout import SandboxTools
    from veriloop.sandbox import Sandbox
    from veriloop.verifiers import code_workers

    return SandboxTools(Sandbox(workers=code_workers()))


def _fit_context(
    tasks: list[Task], engine: Any, episode: Any, policy: str, on_warning: Callable[[str], None] | None
) -> tuple[list[Task], list[dict[str, Any]]]:
    """Tasks whose prompt and answer fit the model's context, and the ones that do not.

    A prompt that does not leave its task's new tokens per turn (``episode.max_tokens_for`` its
    domain) would be cut or crash the model: it is skipped (reported per task, with that budget)
    or, with ``policy="error"``, a UserError.
    """
    from veriloop.rollout import prompt_tokens

    limit = getattr(engine, "context_length", None)
    if not limit:
        return tasks, []
    fitting, skipped = [], []
    for task in tasks:
        tokens, budget = prompt_tokens(task, engine, episode), episode.max_tokens_for(task.domain)
        if tokens is not None and tokens + budget > limit:
            skipped.append({"task_id": task.id, "prompt_tokens": tokens, "max_tokens": budget, "context": limit})
        else:
            fitting.append(task)
    if skipped and policy == "error":
        shown = ", ".join(f"{s['task_id']} ({s['prompt_tokens']} + {s['max_tokens']} tokens)" for s in skipped[:5])
        raise UserError(
            f"{len(skipped)} prompts do not leave room for their new tokens per turn within the model's context "
            f"of {limit}: {shown}{', ...' if len(skipped) > 5 else ''} (--too-long skip leaves them out)"
        )
    if skipped and on_warning is not None:
        on_warning(
            f"{len(skipped)} tasks skipped: their prompts do not leave room for their new tokens per turn "
            f"({_budgets(skipped)}) within the model's context of {limit} (listed in summary.json under "
            "skipped_too_long)"
        )
    return fitting, skipped


def _budgets(skipped: list[dict[str, Any]]) -> str:
    """The distinct turn budgets of skipped tasks, e.g. ``256`` or ``40, 416``."""
    return ", ".join(str(b) for b in sorted({s["max_tokens"] for s in skipped}))


def _finish(
    out: Path,
    settings: EvalSettings,
    rows: list[EvalSample],
    overlap_report: OverlapReport | None,
    skipped: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Write ``samples.parquet`` and ``summary.json``, then drop the part files."""
    summary: dict[str, Any] = {
        "model": settings.model,
        "engine": settings.engine,
        "task_set_hash": settings.task_set_hash,
        "task_files": list(settings.task_files),
        "samples_per_task": settings.samples_per_task,
        "seed": settings.seed,
        "temperature": settings.episode.get("temperature"),
        "max_tokens": settings.episode.get("max_tokens_per_turn"),
        "environments": settings.environments,
        **summarize(rows, settings.samples_per_task),
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "out": str(out),
    }
    if settings.benchmark is not None:
        summary["benchmark"] = settings.benchmark
    if settings.episode.get("max_tokens_by_domain"):
        summary["max_tokens_by_domain"] = settings.episode["max_tokens_by_domain"]
    if skipped:
        summary["skipped_too_long"] = skipped
    if overlap_report is not None:
        summary["overlap"] = {k: v for k, v in overlap_report.to_dict().items() if not k.endswith("_overlaps")}
    write_parquet(out / SAMPLES_FILE, rows)
    _write_json(out / SUMMARY_FILE, summary)
    shutil.rmtree(out / PARTS_DIR, ignore_errors=True)
    return summary


def _write_json(path: Path, data: dict[str, Any]) -> None:
    with atomic_write(path) as handle:
        handle.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
