"""The work ``veriloop verify`` does per task or per run is done once: the checks that validate
a ``python_tests`` task ask their questions of one parse of its code, and the code sandbox
preloads the graders' harnesses, so a run's script carries its job alone."""

from __future__ import annotations

import ast
import json

import pytest

from veriloop.core import Response, Task
from veriloop.sandbox import Sandbox, SandboxUnavailable
from veriloop.tasks import check_task
from veriloop.verifiers import code_workers, new_code_sandbox, set_code_workers, use_code_sandbox, verify_many

TESTS = """
import math

def check(candidate):
    assert candidate(2, 3) == 5
    assert math.isclose(candidate(0.5, 0.25), 0.75)
"""


def test_a_tasks_tests_are_parsed_once_per_reading_for_every_check_of_its_config(monkeypatch):
    parsed: list[str] = []
    parse = ast.parse

    def counting(source, *args, **kwargs):
        parsed.append(source)
        return parse(source, *args, **kwargs)

    monkeypatch.setattr(ast, "parse", counting)
    tests = TESTS + "\n# parsed once\n"  # a text no earlier test has parsed
    task = Task(
        id="add",
        domain="code",
        prompt="Write add(a, b).",
        verifier={"kind": "python_tests", "entry_point": "add", "tests": tests, "prompt_code": "import math\n"},
    )
    assert check_task(task) is None  # validates the config, plans the coded suite, runs the kind's task check
    first = parsed.count(tests)
    assert check_task(task) is None  # as a second load of the file, or a verification, would
    assert parsed.count(tests) == first  # every reading of the text is cached per text
    assert first <= 3  # its names, its literal cases (none here) and its instrumented program


def test_a_typo_in_the_tests_is_still_found_after_they_were_checked():
    tests = TESTS.replace("candidate(0.5", "candidat(0.5")
    verifier = {"kind": "python_tests", "entry_point": "add", "tests": tests}
    for _ in range(2):
        problem = check_task(Task(id="typo", domain="code", prompt="p", verifier=verifier))
        assert problem is not None and "name 'candidat' is not defined" in problem


class RecordingSandbox:
    """A real sandbox that keeps the length of every script it is given to run."""

    def __init__(self, sandbox: Sandbox):
        self.sandbox, self.workers, self.scripts = sandbox, sandbox.workers, []

    @property
    def preloaded(self) -> frozenset[str]:
        return getattr(self.sandbox, "preloaded", frozenset())

    def run_python(self, code: str, **options):
        self.scripts.append(len(code))
        return self.sandbox.run_python(code, **options)

    def close(self) -> None:
        self.sandbox.close()


def verified_on(sandbox: Sandbox, code) -> tuple[list, list[int]]:
    """Scores of right, wrong and crashing answers to a data-only and a coded suite, checked on
    ``sandbox``, and the lengths of the scripts it ran."""
    recording = RecordingSandbox(sandbox)
    before = code_workers()
    use_code_sandbox(recording)
    try:
        tasks = [code.add_task(task_id="literal"), code.add_task(code.CODED_TESTS, task_id="coded")]
        answers = [code.GOLD_ADD, "    return a - b\n", "    raise SystemExit(0)\n"]
        pairs = [
            (task, Response(id=f"{task.id}-{n}", task_id=task.id, response=code.ADD_PROMPT + answer))
            for task in tasks
            for n, answer in enumerate(answers)
        ]
        scores = verify_many(pairs, threads=2)
    finally:
        set_code_workers(before)  # closes the sandbox and goes back to the default one
    return [(s.id, s.status, s.reward, s.passed, s.detail) for s in scores], recording.scripts


def test_runs_on_the_code_sandbox_carry_their_job_alone_and_score_as_without_preloading(code):
    try:
        preloading, plain = new_code_sandbox(1), Sandbox(workers=1)
    except SandboxUnavailable as exc:
        pytest.skip(f"no sandbox on this machine: {exc}")
    with_harness, small = verified_on(preloading, code)
    without, shipped = verified_on(plain, code)
    assert with_harness == without
    assert [s[3] for s in with_harness] == [True, False, False, True, False, False]
    jobs, harnessed = [n for n in small if n > 200], [n for n in shipped if n > 200]  # not the tiny probe
    assert min(len(jobs), len(harnessed)) >= 6 and max(jobs) < 8_000 < 20_000 < min(harnessed)


FROZEN_AFTER_VERIFY = """
import gc, sys
from veriloop.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    assert not exc.code, exc.code
print(gc.get_freeze_count())
"""


def test_the_verify_command_freezes_what_it_loaded_before_it_verifies(tmp_path, code):
    # The modules and the task set live as long as the command: the collector should not rescan
    # them while the sandboxes are kept busy.
    import subprocess
    import sys

    from veriloop.core import write_jsonl

    write_jsonl(tmp_path / "tasks.jsonl", [code.add_task()])
    write_jsonl(tmp_path / "responses.jsonl", [{"id": "r", "task_id": "add", "response": code.GOLD_ADD}])
    files = ["--tasks", tmp_path / "tasks.jsonl", "--responses", tmp_path / "responses.jsonl"]
    command = [sys.executable, "-c", FROZEN_AFTER_VERIFY, "verify", *files, "--out", tmp_path / "s.jsonl"]
    done = subprocess.run([str(part) for part in command], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.split()[-1]) > 10_000  # every object of the loaded modules and tasks
    assert json.loads((tmp_path / "s.jsonl").read_text())["passed"] is True


def test_a_candidate_run_on_a_preloading_sandbox_does_not_wait_for_the_interpreter_probe(monkeypatch):
    # The probe is a run of its own on a worker: a candidate run that needs nothing of it (its
    # harness is already in the sandbox) must not wait for it.
    from veriloop.verifiers.code import _candidate_calls
    from veriloop.verifiers.code._code_sandbox import CodeLimits
    from veriloop.verifiers.code.sandboxed._wire import call_key

    def probe_not_done() -> str:
        raise AssertionError("the candidate's run waited for the interpreter probe")

    monkeypatch.setattr(_candidate_calls, "sandbox_tag", probe_not_done)
    program = "def double(x):\n    return 2 * x\n"
    ran = _candidate_calls.call_candidate(program, "double", [call_key([21], {})], CodeLimits(5, 256))
    assert ran.load_error is None and ran.outcomes[call_key([21], {})]["value"] == 42
