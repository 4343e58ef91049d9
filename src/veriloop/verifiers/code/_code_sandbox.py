"""The sandbox that code verifiers run in: one per process, created on first use (or handed
in with ``use_code_sandbox``).

Every code verifier run goes through one shared ``veriloop.sandbox.Sandbox``, kept for the
life of the process so its warm interpreters are reused; each run carries its own limits.
The number of workers (processes at once) is set with ``set_code_workers`` (the
``--workers`` of ``veriloop verify``); checks from many threads share the pool.
"""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from veriloop.core import ExecResult

if TYPE_CHECKING:
    pass

T = TypeVar("T")

_lock = threading.Lock()
_probe_lock = threading.Lock()
_state: dict[str, Any] = {"workers": min(4, os.cpu_count() or 1), "sandbox": None, "pool": None, "tag": None}


@dataclass(frozen=True)
class CodeLimits:
    """Limits of one sandboxed grading process."""

    timeout_s: float
    memory_mb: int


def set_code_workers(workers: int) -> None:
    """Set how many sandboxed processes code verifiers run at once; restarts the sandbox."""
    if not isinstance(workers, int) or workers < 1:
        raise ValueError("workers must be a whole number of at least 1")
    with _lock:
        _close_locked()
        _state["workers"] = workers


def use_code_sandbox(sandbox: Any) -> None:
    """Run code verifiers in ``sandbox`` (a ``veriloop.sandbox.Sandbox``, e.g. one started
    early or on a remote service); its ``workers`` become the code workers. It is closed with
    the others at exit or by ``set_code_workers``."""
    with _lock:
        _close_locked()
        _state["workers"] = sandbox.workers
        _state["sandbox"] = sandbox
        _state["pool"] = _new_pool(sandbox.workers)


def code_workers() -> int:
    """How many sandboxed processes code verifiers run at once."""
    return _state["workers"]


def _new_pool(workers: int) -> ThreadPoolExecutor:
    # Twice the workers: a run is prepared while the previous one is still in the sandbox.
    return ThreadPoolExecutor(max_workers=2 * workers, thread_name_prefix="code-verifier")


def new_code_sandbox(workers: int, environment: str | None = None):
    """A ``veriloop.sandbox.Sandbox`` of ``workers`` made for code verifiers: it preloads their
    harnesses (``_scripts.harness_preload``), so a run's script is one import and a call."""
    from veriloop.sandbox import Sandbox
    from veriloop.verifiers.code._scripts import harness_preload

    return Sandbox(workers=workers, environment=environment, preload=harness_preload())


def _sandbox():
    with _lock:
        if _state["sandbox"] is None:
            _state["sandbox"] = new_code_sandbox(_state["workers"])
            _state["pool"] = _new_pool(_state["workers"])
        return _state["sandbox"], _state["pool"]


def environment_sandbox(name: str | None):
    """The shared sandbox on environment ``name`` (the plain code sandbox for None), started on
    first use with the code workers' count; a missing environment raises UserError."""
    if name is None:
        return _sandbox()[0]
    with _lock:
        sandboxes = _state.setdefault("environments", {})
        if name not in sandboxes:
            sandboxes[name] = new_code_sandbox(_state["workers"], environment=name)
        return sandboxes[name]


def preloaded_in(environment: str | None) -> frozenset[str]:
    """The modules the code sandbox on ``environment`` preloads (``Sandbox.preloaded``; none for
    a sandbox handed in that was made without them)."""
    return getattr(environment_sandbox(environment), "preloaded", frozenset())


def start_code_sandbox() -> None:
    """Start the shared sandbox in the background, so its start-up overlaps other work.

    A failure here is left for the first real run to report (as that check's infra error).
    """

    def start() -> None:
        try:
            sandbox_tag()
        except Exception:  # reported again, with context, by the first run that needs it
            pass

    threading.Thread(target=start, name="code-sandbox-start", daemon=True).start()


def sandbox_tag() -> str:
    """The bytecode tag of the sandbox's interpreter (``_scripts.interpreter_tag``), probed once."""
    with _probe_lock:
        if _state["tag"] is None:
            from veriloop.verifiers.code._scripts import TAG_PROBE

            result = run_python([PythonRun(TAG_PROBE, CodeLimits(timeout_s=30, memory_mb=256))])[0]
            _state["tag"] = result.stdout.strip() if result.ok else "unknown"
        return _state["tag"]


@dataclass(frozen=True)
class PythonRun:
    """One sandboxed interpreter run: source, stdin and limits."""

    code: str
    limits: CodeLimits
    stdin: str = ""
    environment: str | None = None  # a task's environment: its packages are importable


def run_python(runs: Sequence[PythonRun]) -> list[ExecResult]:
    """Run each script in a fresh isolated interpreter, concurrently; results in order."""
    from veriloop.sandbox import Limits

    def run(item: PythonRun) -> ExecResult:
        limits = Limits(timeout_s=item.limits.timeout_s, memory_mb=item.limits.memory_mb)
        return environment_sandbox(item.environment).run_python(item.code, stdin=item.stdin, limits=limits)

    return _each(run, runs)


def _each(run: Callable[[T], ExecResult], items: Sequence[T]) -> list[ExecResult]:
    """``run`` on every item on the code workers' pool, results in order; a run that lost its
    sandbox is run again once (``sandbox_lost``)."""
    _, pool = _sandbox()
    results = [run(item) for item in items] if len(items) <= 1 else list(pool.map(run, items))
    for index, result in enumerate(results):
        if sandbox_lost(result):
            results[index] = run(items[index])
    return results


@dataclass(frozen=True)
class ProgramRuns:
    """A program's runs, one per stdin in order; or, when its build failed, that build and no runs."""

    runs: tuple[ExecResult, ...] = ()
    failed_build: ExecResult | None = None


def run_program(
    language: str, code: str, stdins: Sequence[str], limits: CodeLimits, environment: str | None = None
) -> ProgramRuns:
    """Run ``code`` as a program in ``language`` (a name in ``veriloop.sandbox.LANGUAGES``) once
    per stdin (at least one), each in a fresh sandboxed process; results in order.

    Python runs on the warm interpreter (``run_python``). A language that builds is built once
    (``build_code``), and every run starts from that pristine build, never from what an earlier
    run of the program left.
    """
    from veriloop.sandbox import LANGUAGES, Limits, build_code, run_code

    spec = LANGUAGES.get(language)
    if not spec.start:  # Python: the warm interpreter runs the source itself
        return ProgramRuns(tuple(run_python([PythonRun(code, limits, stdin, environment) for stdin in stdins])))
    sandbox = environment_sandbox(environment)
    run_limits = Limits(timeout_s=limits.timeout_s, memory_mb=limits.memory_mb)
    if not spec.build:

        def interpret(stdin: str) -> ExecResult:  # a script: nothing to build, so its run is always made
            ran = run_code(sandbox, language, code, stdin=stdin, limits=run_limits).run
            assert ran is not None
            return ran

        return ProgramRuns(tuple(_each(interpret, stdins)))
    built = build_code(sandbox, language, code, limits=run_limits)
    if built.result is not None and sandbox_lost(built.result):
        built = build_code(sandbox, language, code, limits=run_limits)
    if built.snapshot is None:
        return ProgramRuns(failed_build=built.result)

    def run(stdin: str) -> ExecResult:
        return sandbox.run(spec.start, stdin=stdin, limits=run_limits, snapshot=built.snapshot)

    return ProgramRuns(tuple(_each(run, stdins)))


def sandbox_lost(result: ExecResult) -> bool:
    """Whether the run ended with its whole sandbox (replaced by a fresh one).

    That is retried once: a broken sandbox must not cost a candidate its reward. A program
    that ends its sandbox again on purpose gets the second result.
    """
    return result.status == "killed" and result.sandbox_replaced


def _close_locked() -> None:
    for sandbox in _state.pop("environments", {}).values():
        sandbox.close()
    if _state["sandbox"] is not None:
        _state["pool"].shutdown(wait=False, cancel_futures=True)
        _state["sandbox"].close()
        _state["sandbox"] = _state["pool"] = None


@atexit.register
def _close() -> None:
    with _lock:
        _close_locked()
